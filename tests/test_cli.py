"""The ``pyprof`` command line: lazy command groups (pyprof/cli.py GROUPS)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from pyprof import cli


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


@pytest.mark.parametrize("group", sorted(cli.GROUPS))
def test_each_group_registers_exactly_its_commands(group):
    parser = argparse.ArgumentParser()
    importlib.import_module(group).register(parser.add_subparsers())
    assert _commands(parser) == set(cli.GROUPS[group])


def test_full_parser_has_every_command_once():
    names = [n for group in cli.GROUPS.values() for n in group]
    assert len(names) == len(set(names))
    assert _commands(cli.build_parser()) == set(names) | {"config"}


def test_a_command_builds_only_its_group():
    assert _commands(cli.build_parser("dnnl")) == {"dnnl", "run"}
    assert _commands(cli.build_parser("validate")) == set(cli.GROUPS["pyprof.trace.cli"])
    assert _commands(cli.build_parser("config")) == set().union(*cli.GROUPS.values()) | {"config"}
    # an unknown word gets every choice, so argparse names them in its error
    assert "summarize" in _commands(cli.build_parser("sumarize"))


def test_dnnl_command_does_not_import_the_trace_or_bench_tools(tmp_path):
    code = ("import sys; from pyprof import cli; cli.build_parser('dnnl'); "
            "print(sorted(m for m in sys.modules if m.startswith(('pyprof.bench', 'pyprof.trace.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_command_is_a_usage_error_listing_the_choices():
    out = subprocess.run([sys.executable, "-m", "pyprof", "sumarize"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "invalid choice: 'sumarize'" in out.stderr and "summarize" in out.stderr


@pytest.mark.parametrize("argv, said", [
    (["summarize", "t.json", "--formt", "json"], "unrecognized arguments: --formt json; "
                                                 "did you mean --format?"),
    (["validate", "t.json", "--no-progess=1"], "unrecognized arguments: --no-progess=1; "
                                               "did you mean --no-progress?"),
    (["config", "--zzz"], "unrecognized arguments: --zzz")])
def test_a_misspelt_option_gets_its_commands_usage_and_the_nearest(argv, said, capsys):
    # a new user's find: the top level's usage, and no hint, for a command's misspelt option
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(f"usage: pyprof {argv[0]} ")
    assert err.rstrip().splitlines()[-1] == f"pyprof {argv[0]}: error: {said}"
