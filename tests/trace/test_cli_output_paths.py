"""Output paths of the command line (-o, --log, --trace): checked before any work with the
profiler's path checks (trace.bad_output), one line with the fix, exit 1; plot names the file
it really wrote; the writer's temporary file lies in the target's own directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pyprof import cli
from pyprof.trace import validate
from pyprof.trace.writer import TraceWriter

DNNL_LOG = Path(__file__).resolve().parents[1] / "dnnl" / "fixtures" / "v2_timestamps.log"


def _commands(trace: str) -> dict[str, list[str]]:
    return {
        "repair": ["repair", trace, "-o"],
        "compact": ["compact", trace, "-o"],
        "merge": ["merge", trace, trace, "-o"],
        "plot": ["plot", trace, "-o"],
        "report": ["report", trace, "-o"],
        "dnnl": ["dnnl", str(DNNL_LOG), "--trace", trace, "-o"],
    }


@pytest.mark.parametrize("command", ["repair", "compact", "merge", "plot", "report", "dnnl"])
def test_output_that_is_a_directory_is_one_line_error_before_any_work(command, fx, tmp_path, capsys):
    outd = tmp_path / "outd"
    outd.mkdir()
    before = set(os.listdir(tmp_path))
    code = cli.main(_commands(str(fx("small.json")))[command] + [str(outd)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"pyprof {command}: error: cannot write output {str(outd)!r}: "
                          f"{str(outd)!r} is a directory;")
    assert err.count("\n") == 1 and "fix: name a file inside it" in err
    example = {"plot": "plot.png", "report": "report.html"}.get(command, "trace.json")
    assert err.endswith(f"e.g. {str(outd / example)!r}\n"), err  # the file the command writes
    assert set(os.listdir(tmp_path)) == before and os.listdir(outd) == []  # no temp file left


@pytest.mark.parametrize("command", ["merge", "compact", "report"])
def test_output_in_a_missing_directory_fails_before_reading_the_input(command, tmp_path, capsys):
    missing_input = str(tmp_path / "no_such_trace.json")  # would be trace.cannot_open if read
    out = tmp_path / "nodir" / "x.json"
    code = cli.main(_commands(missing_input)[command] + [str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"directory {str(out.parent)!r} does not exist" in err
    assert err.rstrip().endswith("fix: create it first, or choose an existing directory")


def test_plot_without_extension_prints_the_path_it_wrote(fx, tmp_path, capsys):
    out = tmp_path / "chart"
    assert cli.main(["plot", str(fx("small.json")), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == f"wrote {out}.png (no extension given: PNG)\n"
    assert not out.exists()
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_with_extension_prints_it_unchanged(fx, tmp_path, capsys):
    out = tmp_path / "chart.svg"
    assert cli.main(["plot", str(fx("small.json")), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert out.read_text().lstrip().startswith("<?xml")


def test_writer_refuses_a_directory_and_writes_its_temp_file_beside_the_target(tmp_path):
    outd = tmp_path / "sub"
    outd.mkdir()
    with pytest.raises(Exception) as info:
        with TraceWriter(outd):
            pass
    assert getattr(info.value, "code", None) == "trace.bad_output"
    assert os.listdir(outd) == [] and sorted(os.listdir(tmp_path)) == ["sub"]

    target = outd / "t.json"
    with TraceWriter(target) as w:
        w.write({"name": "x", "ph": "X", "ts": 1, "dur": 2, "pid": 0, "tid": 0})
        temps = [n for n in os.listdir(outd) if n.endswith(".tmp")]
        assert len(temps) == 1 and sorted(os.listdir(tmp_path)) == ["sub"]
    assert os.listdir(outd) == ["t.json"]
    assert validate(target).ok


@pytest.mark.parametrize("flag", ["--trace", "--log"])
def test_run_checks_its_paths_before_starting_the_command(flag, tmp_path, capsys):
    outd = tmp_path / "outd"
    outd.mkdir()
    marker = tmp_path / "ran"
    paths = {"--log": str(tmp_path / "d.log"), "--trace": str(tmp_path / "t.json")}
    paths[flag] = str(outd)
    code = cli.main(["run", "--dnnl", "--log", paths["--log"], "--trace", paths["--trace"], "--",
                     sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == (f"pyprof run: error: cannot write output {str(outd)!r}: {str(outd)!r} is a "
                   f"directory; nothing was done. fix: name a file inside it, e.g. "
                   f"{os.path.join(str(outd), {'--log': 'dnnl.log'}.get(flag, 'profile.json'))!r}\n")
    assert not marker.exists() and sorted(os.listdir(tmp_path)) == ["outd"]


@pytest.mark.parametrize("command, flags", [("report", []), ("flamegraph", []),
                                            ("report", ["link"])])
def test_an_output_that_is_an_input_trace_is_refused(command, flags, fx, tmp_path, capsys):
    """A new user's find: `pyprof flamegraph t.json -o t.json` and `pyprof report t.json -o
    t.json` replaced the trace with folded stacks or HTML (merge, compact and repair write a
    trace, so in place is safe there; plot refuses by extension). A hard link is the same file."""
    trace = tmp_path / "t.json"
    trace.write_bytes(fx("small.json").read_bytes())
    out = trace
    if flags == ["link"]:
        out = tmp_path / "same.json"
        os.link(trace, out)
    before = trace.read_bytes()
    code = cli.main([command, str(trace), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{str(out)!r} is a trace this command reads, and writing there would replace it" in err
    assert trace.read_bytes() == before
