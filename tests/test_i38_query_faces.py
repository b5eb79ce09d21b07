"""Issue 38 items 10 and 17: what `query` says when SQL is wrong (DuckDB's hints, view names it
was close to), and values and names that tracebacked: a list column to CSV, and trace names with
control, bidirectional, emoji or NUL characters through import, show, query, export and report.

The oracles are the names as written into the trace and Python's own json/csv readers."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import x
from prof_engine.engine.tables import write_csv

# Names as the profiled program might give them: a NUL, a right-to-left override, a terminal
# colour sequence, an emoji (a surrogate pair in JSON), a C1 control (CSI), BEL/BS/CR.
ODD = {
    "nul": "aten::nul\u0000op",
    "bidi": "evil\u202egnp.exe",
    "esc": "\u001b[31mred\u001b[0m",
    "emoji": "smile\U0001f600",
    "c1": "c1\u009bx",
    "bell": "bell\u0007\u0008back\r",
}
# How a terminal shows each: the character's escape, never the character
SHOWN = {
    "nul": r"aten::nul\x00op",
    "bidi": r"evil\u202egnp.exe",
    "esc": r"\x1b[31mred\x1b[0m",
    "emoji": "smile\U0001f600",
    "c1": r"c1\x9bx",
    "bell": r"bell\x07\x08back\x0d",
}
# What a terminal would act on: C0 but newline, DEL and C1, bidirectional controls
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def main(*args: str) -> tuple[int, str, str]:
    """The console script's `main`, in this process: (exit status, stdout, stderr)."""
    from prof_engine.cli import main

    # text streams with a byte buffer beneath, as a console's are (CSV is written to the bytes)
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") for _ in range(2))
    argv = sys.argv
    sys.argv = ["prof-engine", *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.argv = argv
    return code, _text(out), _text(err)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def cli(monkeypatch, *args: str) -> tuple[int, str, str]:
    """`main` at a terminal 300 columns wide."""
    monkeypatch.setenv("COLUMNS", "300")
    return main(*args)


@pytest.fixture(scope="module")
def odd_trace(tmp_path_factory) -> Path:
    """A Kineto trace of one step whose ops and kernels have the ODD names (JSON-escaped: `\\u0000`)."""
    root = tmp_path_factory.mktemp("odd")
    events = [x("ProfilerStep#1", 0, 200, cat="user_annotation")]
    for i, name in enumerate(ODD.values()):
        events += [
            x(name, 5 + 20 * i, 3),
            x("cudaLaunchKernel", 5.5 + 20 * i, 0.5, cat="cuda_runtime", correlation=100 + i),
            x(name, 6 + 20 * i, 1, cat="kernel", pid=0, tid=7, stream=7, correlation=100 + i, device=0),
        ]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})  # ensure_ascii: \u0000, \ud83d\ude00
    assert "\\u0000" in text and "\\u202e" in text and "\\ud83d\\ude00" in text
    (root / "t.json").write_text(text, encoding="ascii")
    return root / "t.json"


@pytest.fixture(scope="module")
def imported(tmp_path_factory, odd_trace) -> tuple[Path, int, str]:
    """The trace imported once by the CLI: (the run, exit status, what the import printed)."""
    run = tmp_path_factory.mktemp("odd_run") / "run"
    code, out, err = main("import", odd_trace, "-o", run)
    return run, code, out + err


@pytest.fixture(scope="module")
def small_run(imported) -> Path:
    return imported[0]


def test_odd_names_pass_every_face_and_the_terminal_shows_them_escaped(imported, tmp_path, monkeypatch):
    run, code, printed = imported
    assert code == 0 and "Traceback" not in printed, printed

    code, out, err = cli(monkeypatch, "show", run)
    assert code == 0, err
    printed += out + err

    # a table: every name, escaped
    code, out, err = cli(monkeypatch, "query", run, "select distinct name from slices where kind = 'host_op'")
    assert code == 0, err
    printed += out + err
    for key, shown in SHOWN.items():
        assert shown in out, (key, out)

    # JSON lines: the same JSON values (Python's reader gives the names back), nothing raw
    code, out, err = cli(monkeypatch, "query", run, "select name from slices where kind = 'host_op'", "-f", "json")
    assert code == 0, err
    printed += out + err
    assert {json.loads(line)["name"] for line in out.splitlines()} == set(ODD.values())

    # CSV is data: the names as they are (Python's reader gives them back)
    code, out, err = cli(monkeypatch, "query", run, "select name from slices where kind = 'host_op'", "-f", "csv")
    assert code == 0, err
    assert {row[0] for row in list(csv.reader(io.StringIO(out, newline="")))[1:]} == set(ODD.values())

    code, out, err = cli(monkeypatch, "export", run, "op_summary", "-o", tmp_path / "out")
    assert code == 0, err
    printed += out + err
    (written,) = (tmp_path / "out").glob("op_summary_*.csv")
    with written.open(newline="", encoding="utf-8") as f:
        assert set(ODD.values()) <= {row["Op Name"] for row in csv.DictReader(f)}

    code, out, err = cli(monkeypatch, "report", run, "-o", tmp_path / "r.html")
    assert code == 0, err
    printed += out + err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not UNPRINTABLE.search(page.replace("\n", "").replace("\t", ""))

    assert "Traceback" not in printed
    assert not UNPRINTABLE.search(printed.replace("\n", "").replace("\t", "")), [
        m[0] for m in UNPRINTABLE.finditer(printed.replace("\n", "").replace("\t", ""))
    ]


def test_nested_values_and_blobs_write_to_csv_as_text(small_run, monkeypatch):
    """Arrow's CSV writer refused lists, structs, maps, intervals and non-UTF-8 bytes (`query
    --format csv` tracebacked): nested values are JSON text, formulas still neutralised."""
    run = small_run
    sql = (
        "select [1,2] as l, {'a': '=x'} as s, map([1], ['y']) as m, [[1.5::double], []] as ll, [1, 2]::int[2] as a, "
        "'=cmd' as f, ['=cmd'] as fl, '\\x05'::blob as b, '101'::bit as bits, interval 1 day as i, NULL::int[] as n"
    )
    code, out, err = cli(monkeypatch, "query", run, "--safe", sql, "-f", "csv")
    assert code == 0, err
    header, row = list(csv.reader(io.StringIO(out, newline="")))
    got = dict(zip(header, row))
    assert json.loads(got["l"]) == [1, 2] and json.loads(got["ll"]) == [[1.5], []] and json.loads(got["a"]) == [1, 2]
    assert (
        json.loads(got["s"]) == {"a": "=x"} and json.loads(got["m"]) == [[1, "y"]] and json.loads(got["fl"]) == ["=cmd"]
    )
    assert got["f"] == "'=cmd"  # a formula: neutralised, as before
    assert got["b"] == r"\x05" and got["bits"] == r"\x05\xFD" and got["i"] == "0 months 1 days 0 ns" and got["n"] == ""

    code, out, err = cli(monkeypatch, "query", run, "--safe", sql)  # a table: the same text
    assert code == 0 and "[[1.5], []]" in out and '{"a": "=x"}' in out and "0 months 1 days 0 ns" in out, err


def test_write_csv_of_nested_columns_matches_json_of_their_values(tmp_path):
    """The one CSV writer (export's and query's): each nested cell is `json.dumps` of its value."""
    lists = pa.array([[1, 2], None, [], [3]], pa.list_(pa.int64()))
    structs = pa.array([{"k": "=a", "v": 1.5}, {"k": None, "v": float("nan")}, None, {"k": "b", "v": 0.0}])
    table = pa.table({"l": lists, "s": structs, "name": ["=x", "ok", None, "-1"]})
    write_csv(table.to_batches(max_chunksize=2), table.schema, str(tmp_path / "a.csv"))
    with (tmp_path / "a.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["l"] for r in rows] == [json.dumps([1, 2]), "", json.dumps([]), json.dumps([3])]
    assert [json.loads(r["s"]) if r["s"] else None for r in rows] == [
        {"k": "=a", "v": 1.5},
        {"k": None, "v": None},  # NaN: JSON's null
        None,
        {"k": "b", "v": 0.0},
    ]
    assert [r["name"] for r in rows] == ["'=x", "ok", "", "'-1"]


@pytest.mark.parametrize(
    "sql, hint",
    [
        ("select * from op_sumary", 'Did you mean "op_summary"'),  # not created yet: the run's catalogue
        ("select * from stepp_trace", 'Did you mean "step_trace"'),
        ("select * from kernels", '"kernel_details"'),
        ("select * from xyzzy", "`prof-engine views` lists the run's views"),
        ('select "Op Nme" from op_summary', 'Candidate bindings: "Op Name"'),  # DuckDB's own
        ("select lenght(name) from slices", 'Did you mean "length"'),
    ],
)
def test_a_query_error_keeps_duckdbs_hints_and_names_close_views(small_run, sql, hint):
    import prof_engine
    from prof_engine.errors import QueryError

    with prof_engine.open(small_run) as run, pytest.raises(QueryError) as caught:
        run.sql(sql)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("SQL error: ") and 2 <= len(lines) <= 5, lines
    assert hint in "\n".join(lines[1:]), lines


def test_the_cli_prints_the_caret_under_the_error(small_run, monkeypatch):
    code, out, err = cli(monkeypatch, "query", small_run, "select 1 frm slices")
    lines = err.splitlines()
    assert code == 1 and out == "" and lines[0].startswith("Error: SQL error: Parser Error") and len(lines) <= 5, err
    (line,) = [ln for ln in lines if ln.startswith("LINE 1: ")]
    caret = lines[lines.index(line) + 1]
    # the caret stands under the token DuckDB names (`slices`: `frm` reads as an alias)
    at = caret.index("^")
    assert line[at:].startswith(re.search(r'at or near "([^"]+)"', lines[0])[1]), (line, caret)
