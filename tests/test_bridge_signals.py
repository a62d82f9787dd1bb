"""SIGINT around bridge calls (pyprof/bridge/signals.py), without a JVM: the handler Python had
runs after the outermost call, once; a program that ignores SIGINT keeps ignoring it."""

import os
import signal

import pytest

from pyprof.bridge import signals as bs


@pytest.fixture
def restore_sigint():
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_sigint_waits_for_the_outermost_call_and_runs_once(restore_sigint):
    seen = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    bs.install(bs.saved_handlers())
    with bs.jvm_call():
        with bs.jvm_call():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            assert seen == []  # inside a call: recorded, not run
        assert seen == []  # still inside the outer call
    assert seen == [signal.SIGINT]
    os.kill(os.getpid(), signal.SIGINT)  # outside a call: the handler runs at once
    assert seen == [signal.SIGINT, signal.SIGINT]


def test_default_handler_gives_one_keyboard_interrupt_after_the_call(restore_sigint):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bs.install(bs.saved_handlers())
    after_kill = []
    with pytest.raises(KeyboardInterrupt):
        with bs.jvm_call():
            os.kill(os.getpid(), signal.SIGINT)
            after_kill.append(True)  # the call finishes before the interrupt
    assert after_kill == [True]


def test_an_ignored_sigint_stays_ignored(restore_sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    bs.install(bs.saved_handlers())
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
