"""Terminal tables at 80 and 120 columns: every number whole, the columns left out named, the rows
left out counted (`show`, `query`, `compare`), run as a user would with COLUMNS set and output piped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import prof_engine
from compare_traces import compare_runs  # noqa: F401 - a fixture
from conftest import write_trace, x
from prof_engine.engine.tables import cell_text

STEP_COLUMNS = (
    '"Rank"',
    '"Device"',
    '"Step"',
    'round("End Time(us)" - "Start Time(us)", 3)::DOUBLE AS "Step Time(us)"',
    '"Computing"',
    '"Communication(Not Overlapped)"',
    '"Overlapped"',
    '"Free"',
    '"Preparing"',
)
HIDDEN = re.compile(r"… (\d+) columns? hidden \((.*)\): ")


def cli(columns: int, *args: str, timeout: float = 120) -> str:
    """stdout of `python -m prof_engine ARGS` piped, with COLUMNS=`columns`; it must succeed."""
    env = {**os.environ, "COLUMNS": str(columns)}
    proc = subprocess.run(
        [sys.executable, "-m", "prof_engine", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def many_steps(path: Path, first: int = 131, last: int = 551) -> Path:
    """A one-GPU trace of steps `first`..`last` (421), each ~600 ms: a 106,252 µs kernel, 321,519 µs
    idle, then an all-reduce."""
    events, t, corr = [], 1_700_000_000_000_000.0, 0
    for step in range(first, last + 1):
        events.append(x(f"ProfilerStep#{step}", t, 600_030.0 + step, cat="user_annotation"))
        for name, begin, dur, stream in (
            ("gemm_kernel", 100.0, 106_252.0, 7),
            ("ncclKernel_AllReduce_RING_LL_Sum_float", 427_871.0, 172_000.0 + step, 20),
        ):
            corr += 1
            events.append(x("cudaLaunchKernel", t + begin - 50, 5, cat="cuda_runtime", correlation=corr))
            events.append(
                x(name, t + begin, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, correlation=corr)
            )
        t += 600_030.0 + step + 20
    return write_trace(path, events)


@pytest.fixture(scope="module")
def nccl_run(nccl_2rank_run) -> Path:
    return nccl_2rank_run


@pytest.fixture(scope="module")
def steps_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("render")
    return prof_engine.import_trace([many_steps(d / "steps.json")], d / "steps", jobs=1)


def section(out: str, title: str) -> list[str]:
    """The lines of the table titled `title` (rich may wrap a title) and the notes under it."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title[:24]))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└")) + 1
    while end < len(lines) and lines[end].startswith("… "):
        end += 1
    return lines[start:end]


def hidden_columns(lines: list[str]) -> list[str]:
    notes = [m for line in lines if (m := HIDDEN.match(line))]
    if not notes:
        return []
    (note,) = notes
    names = note.group(2).split(", ")
    assert int(note.group(1)) == len(names)
    return names


def body_rows(lines: list[str]) -> list[list[str]]:
    """The cells of each one-line body row (between the header rule `┡` and the bottom `└`)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return [[c.strip() for c in line.split("│")[1:-1]] for line in lines[start + 1 : end]]


def check_step_table(run: Path, columns: int) -> tuple[list[str], list[str]]:
    """`show RUN` at `columns`: each line fits; each step_trace row shown has every value of the
    columns not named hidden, whole and in order. Returns (hidden columns, notes under the table)."""
    out = cli(columns, "show", run)
    assert max(len(line) for line in out.splitlines() if not line.startswith("… ")) <= columns
    lines = section(out, "Step breakdown (µs)")
    hidden = hidden_columns(lines)
    with prof_engine.open(run) as r:
        want = r.sql(f'SELECT {", ".join(STEP_COLUMNS)} FROM step_trace ORDER BY "Rank", "Device", "Step" NULLS LAST')
    names = want.columns
    assert set(hidden) < set(names) and {"Rank", "Device", "Step"}.isdisjoint(hidden)
    shown = [i for i, n in enumerate(names) if n not in hidden]
    rows = body_rows(lines)
    assert rows == [[cell_text(row[i]) for i in shown] for row in want.rows()[: len(rows)]]
    assert len(rows) == min(len(want), 100)
    return hidden, [line for line in lines if line.startswith("… ") and "hidden" not in line]


@pytest.mark.parametrize("columns", [80, 120])
def test_show_prints_the_nccl_step_table_whole(nccl_run, columns):
    """The NCCL fixture's step table (Step 551, Free 321,519): rich cut 551 to `55` at 120 columns
    and 321,519 to `321` at 80; now every value shows whole and what does not fit is named."""
    hidden, notes = check_step_table(nccl_run, columns)
    assert bool(hidden) == (columns == 80)  # 9 columns need ~99 characters
    assert not notes  # 4 steps: none left out


@pytest.mark.parametrize("columns", [80, 120])
def test_show_says_how_many_steps_it_left_out(steps_run, columns):
    """421 steps: `show` prints the first 100 and says `… 321 more rows`, where it said nothing."""
    hidden, notes = check_step_table(steps_run, columns)
    assert bool(hidden) == (columns == 80)
    with prof_engine.open(steps_run) as r:
        ((total,),) = r.sql("SELECT count(*) FROM step_trace").rows()
    assert total == 421
    assert notes and notes[0].startswith(f"… {total - 100} more rows: a larger --top")


def test_show_wide_prints_every_column(steps_run):
    lines = section(cli(80, "show", steps_run, "--wide"), "Step breakdown (µs)")
    assert not hidden_columns(lines)
    assert len(body_rows(lines)[0]) == len(STEP_COLUMNS)


def test_summary_counts_the_rows_it_leaves_out(steps_run):
    """`Run.summary`'s tables hold their first rows and say how many the whole answer has."""
    with prof_engine.open(steps_run) as r:
        steps = r.summary(3)["Step breakdown (µs)"]
        assert (len(steps), steps.total) == (30, 421)
        ops = r.summary(1)["Top 1 ops by total duration"]  # one row per name: 2 kernels
        ((n_ops,),) = r.sql('SELECT count(DISTINCT "Op Name") FROM op_summary').rows()
        assert (len(ops), ops.total) == (1, n_ops) and n_ops == 2


def test_query_table_caps_its_rows_and_says_so(nccl_run):
    """136,000 rows as a table: the first 1,000 in seconds (rich took 2.5 min to lay out them all),
    then a note with the count left out; --limit changes the cap; csv prints every row."""
    sql = "select range as i, 'op' || range as name from range(136000)"
    began = time.monotonic()
    out = cli(80, "query", nccl_run, sql)
    assert time.monotonic() - began < 30
    assert re.search(r"│\s+999 │ op999 ", out) and not re.search(r"│\s+1000 │", out)
    assert out.rstrip().endswith("… 135,000 more rows: --limit N shows more, --format csv all")
    assert "… 135,990 more rows" in cli(80, "query", nccl_run, sql, "--limit", "10")
    assert len(cli(80, "query", nccl_run, sql, "--format", "csv").splitlines()) == 136_001


def test_query_names_the_columns_it_leaves_out(nccl_run):
    sql = "select " + ", ".join(f"{v} as c{i}" for i, v in enumerate([321519, 551, 232] * 6))
    out = cli(80, "query", nccl_run, sql)
    hidden = hidden_columns(out.splitlines())
    assert hidden and out.splitlines()[-1].endswith("--wide or --format csv shows all")
    (row,) = body_rows(out.splitlines())
    assert row == [str(v) for v in [321519, 551, 232] * 6][: 18 - len(hidden)]
    assert len(body_rows(cli(80, "query", nccl_run, sql, "--wide").splitlines())[0]) == 18


def test_compare_at_80_columns_keeps_its_numbers_whole(compare_runs):  # noqa: F811 - the imported fixture
    """Each cell of the comparison's text tables (its own text layer: the oracle) shows whole in
    the columns not named hidden, at 80 columns, where rich folded or cut them."""
    from prof_engine.engine.compare.text import level_tables

    base, changed = compare_runs["base"], compare_runs["changed"]
    out = cli(80, "compare", base, changed)
    assert max(len(line) for line in out.splitlines() if not line.startswith("… ")) <= 80
    for t in level_tables(prof_engine.compare(base, changed), 10):
        lines = section(out, t.title)
        hidden = hidden_columns(lines)
        text = "\n".join(lines)
        for row in t.rows:
            for header, cell in zip(t.headers, row):
                if (
                    header not in hidden
                    and header not in ("Item", "Where", "Detail", "Status")
                    and re.search(r"\d", cell)
                ):
                    assert re.search(rf"(?<![\w,.]){re.escape(cell)}(?![\w,.])", text), (t.title, header, cell)


def test_check_keeps_the_detail_and_names_what_it_hides(nccl_run):
    """`check` at 80 columns: the rule, its count (whole) and what it found here stay; the columns
    that do not fit are named, where rich squeezed each sentence into a sliver."""
    out = cli(80, "check", nccl_run)
    assert max(len(line) for line in out.splitlines() if not line.startswith("… ")) <= 80
    hidden = hidden_columns(out.splitlines())
    assert "Meaning" in hidden and not {"Rule", "Count", "Detail"} & set(hidden)
    with prof_engine.open(nccl_run) as r:
        ((count,),) = r.sql('SELECT "Count" FROM data_quality WHERE "Rule" = \'missing_ranks\'').rows()
    (row,) = [cells for cells in body_rows(out.splitlines()) if "missing_ranks" in cells]
    assert cell_text(count) in row


def test_a_number_wider_than_the_console_prints_whole(monkeypatch):
    """At 10 columns a 16-character number still prints on one line, whole (rich folded it)."""
    import io

    import pyarrow as pa
    from rich.console import Console

    from prof_engine import render
    from prof_engine.engine import Result

    monkeypatch.setattr(render, "out", Console(file=io.StringIO(), width=10, soft_wrap=False))
    render.table(Result(pa.table({"Time(us)": [123_456_789_012.5], "Name": ["aten::mm"]})))
    text = render.out.file.getvalue()
    assert "123,456,789,012.5" in text and "… 1 column hidden (Name)" in text


def test_the_width_is_read_at_each_print_not_when_the_module_loaded(monkeypatch):
    """rich fixed stdout's width when render loaded, so a command run in-process after one with
    COLUMNS=50 printed at 50 whatever COLUMNS then said (test_advice's show wrapped at 80)."""
    import io

    import pyarrow as pa

    from prof_engine import render
    from prof_engine.engine import Result

    sentence = "advice: no findings; checked " + ", ".join(f"rule_{i}" for i in range(20))
    monkeypatch.setenv("COLUMNS", "50")
    stdout = render._Stdout(file=io.StringIO(), soft_wrap=False)  # made as the module made it, at 50
    monkeypatch.setattr(render, "out", stdout)
    for columns, lines in (("50", lambda n: n > 6), ("400", lambda n: n == 5)):
        monkeypatch.setenv("COLUMNS", columns)
        stdout.file = io.StringIO()
        render.table(Result(pa.table({"Finding": [sentence]})))
        assert stdout.width == int(columns) and lines(len(stdout.file.getvalue().splitlines()))
    monkeypatch.delenv("COLUMNS")
    assert stdout.width == render.PIPED_WIDTH  # piped, no COLUMNS: the same console, now 240 wide
