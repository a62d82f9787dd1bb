"""The trace file a config names again while MXNet writes it: its events are kept in parts.

The rule is data (``api.json`` ``keep_filename``), shared with the JVM layer: MXNet's config
unlinks its target file, so before a config that names the file the profiler has been writing,
the file's bytes are kept in a hidden part beside it (a hard link; where the file system has
none, a rename after the dump timer was stopped). MXNet then writes later dumps into a new file,
without its header. The finished dump joins the parts and the file into one valid trace
(:func:`join`). Package-internal: ``pyprof.profiler`` calls these under its tracker lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import string
import sys
import time
from collections.abc import Callable

from .. import rules
from .rawfile import METADATA, complete_headless_trace, join_traces
from .tracker import TRACKER


SPEC: dict[str, str] = rules.API["keep_filename"]
_FIELDS = {"pid": r"(?P<pid>\d+)", "index": r"(?P<index>\d+)", "name": r"(?P<name>.+)"}
_PART = re.compile("".join(re.escape(text) + (_FIELDS[field] if field else "")
                           for text, field, _, _ in string.Formatter().parse(SPEC["part_name"]))
                   + r"\Z")


def _beside(path: str, pattern: str, **fields: object) -> str:
    full = os.path.abspath(path)
    name = pattern.format(pid=os.getpid(), name=os.path.basename(full), **fields)
    return os.path.join(os.path.dirname(full), name)


def part_path(path: str, index: int) -> str:
    """The ``index``-th part kept of ``path``: ``.pyprof-<pid>-kept-<index>-<name>.json``
    beside it (the leftover cleanup joins a dead process's into ``path``: :func:`join_leftover`)."""
    return _beside(path, SPEC["part_name"], index=index)


def keep(path: str, index: int, stop_timer: Callable[[str], None]) -> str | None:
    """Keep the bytes of ``path`` in its ``index``-th part, just before a config to ``path``.

    A hard link: a continuous-dump write that lands before the config goes to the same inode,
    so it is kept too. Without hard links (``os.link`` fails), ``stop_timer(scratch)`` must
    configure MXNet to the scratch path with continuous_dump off (no write can land any more,
    MXNet keeps its queued events), then the file is renamed. Returns the part, or None when
    there is no file (nothing was dumped yet: MXNet still holds every event).
    """
    part = part_path(path, index)
    try:
        os.link(path, part)
        return part
    except FileNotFoundError:
        return None
    except OSError:
        pass  # no hard links on this file system (EPERM, ENOTSUP, EMLINK)
    scratch = _beside(path, SPEC["scratch_name"])
    try:
        stop_timer(scratch)
        os.replace(path, part)
    except FileNotFoundError:
        return None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    return part


def retry_while_timer_exits(config: Callable[[], None], wait_s: float) -> None:
    """Call ``config`` (a config call to MXNet), retried for up to ``wait_s`` seconds while it
    fails with "auto_remove_ == false": a dump timer stopped by :func:`keep`'s fallback exits at
    its next wake-up (up to dump_period later), and until then MXNet starts no new one."""
    from ..errors import MXNetError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            config()
            return
        except MXNetError as exc:
            if "auto_remove_" not in exc.mxnet_message or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def join(path: str) -> bool:
    """Join the parts kept of ``path`` (the tracker's ``kept_parts``, in order) and ``path``
    into one valid trace at ``path``, with every metadata event this process has seen first,
    then delete the parts (only once the joined file is in place). False when none were kept.
    Under the tracker lock."""
    parts = TRACKER.kept_parts
    if not parts:
        return False
    join_traces([*parts, os.path.abspath(path)], os.path.abspath(path), METADATA)
    TRACKER.kept_parts = []
    for part in parts:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
    return True


def finish(path: str) -> None:
    """After a dump that finished ``path``: join the parts kept of it, or rewrite it as a valid
    trace (MXNet's 64-bit ids renumbered; its header restored when it was configured after the
    profiler ran), unless it holds more than ``api.json finished_dump.max_bytes`` or the rewrite
    fails (a full disk, a file MXNet cut short): then one line on stderr names ``pyprof
    repair`` and MXNet's file is left as it is."""
    if join(path):
        return
    try:
        size = os.path.getsize(path)
    except OSError:
        return  # nothing written: the dump's own check reports it
    rule = rules.API["finished_dump"]
    if TRACKER.repair_on_finish:  # headless: invalid JSON otherwise
        complete_headless_trace(path)
    elif size > rule["max_bytes"]:
        print(rule["left_note"].format(path=path, size=size, max_bytes=rule["max_bytes"]),
              file=sys.stderr, flush=True)
    else:
        try:  # written beside and moved in place: a failure leaves MXNet's file as it is
            complete_headless_trace(path)
        except Exception as exc:  # noqa: BLE001 (a full disk, a file MXNet cut short: said, not raised)
            print(rule["failed_note"].format(path=path, reason=str(exc).splitlines()[0]),
                  file=sys.stderr, flush=True)


def parse_part(name: str) -> tuple[int, int, str] | None:
    """``(pid, index, name of the kept file)`` of a part's file name, or None if not a part."""
    m = _PART.match(name)
    return None if m is None else (int(m["pid"]), int(m["index"]), m["name"])


def join_leftover(parts: list[str], path: str) -> None:
    """Join the kept ``parts`` of a dead process (in order) and the bytes ``path`` holds now
    (MXNet's headless, unfinished continuation; maybe absent) into ``path``, byte for byte, then
    delete the parts. The result is an unfinished trace that ``pyprof repair`` makes valid.
    Written to a temporary file beside ``path`` and moved in place, so a failure (OSError,
    raised) leaves the parts and ``path`` as they were."""
    full = os.path.abspath(path)
    temp = _beside(full, rules.API["raw_trace"]["temp_prefix"] + "{pid}-kept-join-{name}.tmp")
    try:
        with open(temp, "wb") as out:
            for source in [*parts, full]:
                with contextlib.suppress(FileNotFoundError), open(source, "rb") as f:
                    shutil.copyfileobj(f, out)
        with contextlib.suppress(OSError):
            shutil.copymode(parts[0], temp)
        os.replace(temp, full)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    for part in parts:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
