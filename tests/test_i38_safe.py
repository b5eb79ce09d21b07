"""Issue 38 item 16: `query --safe` is read-only by construction. `EXPLAIN ANALYZE` runs the
statement it explains, so `EXPLAIN ANALYZE COPY ... TO 'RUN/manifest.json'` destroyed the run with
exit 0. Each kind of statement that writes, changes a setting or reaches outside the run is refused
in one line, and the run's files are byte for byte what they were (the oracle: a hash of every file
under the run, and a listing of the directory beside it)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

import prof_engine
from conftest import x
from prof_engine.errors import QueryError


def _files(root: Path) -> dict[str, str]:
    """Every file under `root` (the run, and what lies beside it) with a hash of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """A directory holding a small run, `run`, imported from a Kineto trace of one step."""
    root = tmp_path_factory.mktemp("safe")
    events = [x("ProfilerStep#1", 0, 110, cat="user_annotation")] + [
        x(f"aten::op{i}", 5 + 10 * i, 3) for i in range(10)
    ]
    (root / "t.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    prof_engine.import_trace([root / "t.json"], root / "run")
    return root


@pytest.fixture(scope="module")
def safe(place):
    with prof_engine.open(place / "run", read_only_sql=True) as run:
        yield run


def _writes(place: Path) -> dict[str, str]:
    """Statements that would write, each to a target it would damage or create."""
    run = place / "run"
    part = next(run.joinpath("slices").rglob("*.parquet"))
    return {
        "copy_manifest": f"COPY (SELECT 1 AS x) TO '{run}/manifest.json' (FORMAT csv)",
        "copy_part": f"COPY (SELECT 1 AS x) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
        "copy_new": f"COPY (SELECT 1 AS x) TO '{place}/leak.csv'",
        "export_database": f"EXPORT DATABASE '{place}/exported'",
        "create_table": "CREATE TABLE t AS SELECT 1 AS x",
        "create_view": "CREATE VIEW op_summary2 AS SELECT 1 AS x",
        "create_macro": "CREATE MACRO m() AS 1",
        "insert": "INSERT INTO _run_ranks SELECT * FROM _run_ranks",
        "update": "UPDATE _run_ranks SET rank = rank + 1",
        "delete": "DELETE FROM _run_ranks",
        "attach": f"ATTACH '{place}/other.db'",
        "install": "INSTALL httpfs",
        "load": "LOAD json",
        "set": "SET threads = 1",
        "pragma_set": "PRAGMA threads = 1",
        "pragma_profile": f"PRAGMA profile_output = '{place}/profile.txt'",
        "set_variable": "SET VARIABLE v = 1",
        "call": f"CALL enable_logging(storage = 'file', storage_path = '{place}/logs')",
        "checkpoint": "CHECKPOINT",
    }


REFUSED_KINDS = {
    "copy_manifest": "COPY",
    "copy_part": "COPY",
    "copy_new": "COPY",
    "export_database": "EXPORT",
    "create_table": "CREATE",
    "create_view": "CREATE",
    "create_macro": "CREATE",
    "insert": "INSERT",
    "update": "UPDATE",
    "delete": "DELETE",
    "attach": "ATTACH",
    "install": "LOAD",
    "load": "LOAD",
    "set": "SET",
    "pragma_set": "SET",
    "pragma_profile": "SET",
    "set_variable": "SET",
    "call": "CALL",
    "checkpoint": "CALL",
}


def _refused(safe, place: Path, sql: str, *says: str) -> None:
    """`sql` is refused in one line saying one of `says`, and no file changed or appeared."""
    before = _files(place)
    with pytest.raises(QueryError) as caught:
        safe.sql(sql)
    first, *hints = str(caught.value).splitlines()
    assert any(s in first for s in says), first
    # one line; a parse error has DuckDB's caret under it
    assert not hints or (first.startswith("SQL error: Parser Error") and len(hints) <= 4), hints
    assert _files(place) == before, sql


@pytest.mark.parametrize("kind", list(REFUSED_KINDS))
def test_a_statement_that_writes_or_sets_is_refused(safe, place, kind):
    _refused(safe, place, _writes(place)[kind], f"not {REFUSED_KINDS[kind]}")


@pytest.mark.parametrize("kind", list(REFUSED_KINDS))
def test_explain_analyze_of_a_statement_that_writes_is_refused(safe, place, kind):
    """EXPLAIN ANALYZE runs what it explains: only a SELECT may follow it, with or without options
    (DuckDB's parser refuses to explain some kinds itself: EXPORT, ATTACH)."""
    sql = _writes(place)[kind]
    says = (f"not EXPLAIN of {REFUSED_KINDS[kind]}", "Parser Error")
    _refused(safe, place, f"EXPLAIN ANALYZE {sql}", *says)
    _refused(safe, place, f"-- a comment\nexplain /* another */ analyze (FORMAT json) {sql}", *says)
    _refused(safe, place, f"EXPLAIN {sql}", *says)


@pytest.mark.parametrize(
    "sql, says",
    [
        ("SELECT * FROM read_text('/etc/passwd')", "Permission Error"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
        ("SELECT * FROM read_text('{run}/manifest.json')", "Permission Error"),  # not a file the views read
        ("SELECT * FROM glob('{run}/*')", "Permission Error"),
        # a write reached through a table function that runs SQL of its own
        ("SELECT * FROM query('COPY (SELECT 1) TO ''{place}/leak.csv''')", "SELECT"),
        ("SELECT * FROM enable_logging(storage = 'file', storage_path = '{place}/logs')", "locked"),
        # a write after a read, in one string: every statement is checked before any runs
        ("SELECT 1; COPY (SELECT 1 AS x) TO '{run}/manifest.json' (FORMAT csv)", "not COPY"),
        ("SELECT 1; EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{run}/manifest.json'", "not EXPLAIN of COPY"),
        ("UPDATE EXTENSIONS", "not this statement"),  # a kind DuckDB's Python API cannot name
    ],
)
def test_files_outside_the_views_and_hidden_writes_are_refused(safe, place, sql, says):
    _refused(safe, place, sql.format(run=place / "run", place=place), says)


def test_reads_answer(safe, place):
    """The happy path: SELECT over a view, EXPLAIN [ANALYZE] of a SELECT, reads of the catalog."""
    before = _files(place)
    assert safe.sql("SELECT count(*) FROM op_summary WHERE \"Op Name\" LIKE 'aten::op%'").rows() == [(10,)]
    assert safe.sql("EXPLAIN ANALYZE SELECT count(*) FROM op_summary").columns == ["explain_key", "explain_value"]
    assert len(safe.sql("EXPLAIN (FORMAT json) SELECT * FROM step_trace")) == 1
    assert len(safe.sql("EXPLAIN ANALYZE (SELECT 1)")) == 1
    assert "op_summary" in {r[0] for r in safe.sql("SHOW TABLES").rows()}
    assert "Op Name" in {r[0] for r in safe.sql("DESCRIBE op_summary").rows()}
    assert "Op Name" in {r[1] for r in safe.sql("PRAGMA table_info('op_summary')").rows()}
    assert len(safe.sql("SUMMARIZE slices")) > 0
    assert _files(place) == before


def test_the_cli_refuses_in_one_line_and_the_run_still_opens(place, monkeypatch, capsys):
    """The issue's command, as the CLI runs it: exit 1, one `Error:` line; every later command works."""
    from prof_engine.cli import main

    run = place / "run"
    before = _files(place)
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "prof-engine",
            "query",
            str(run),
            "--safe",
            f"EXPLAIN ANALYZE COPY (select 1 as x) TO '{run}/manifest.json' (FORMAT csv)",
        ],
    )
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    assert exited.value.code == 1 and out == "", (out, err)
    assert err.startswith("Error: --safe runs read-only SQL") and err.count("\n") == 1 and "not EXPLAIN of COPY" in err
    assert _files(place) == before
    monkeypatch.setattr(
        sys, "argv", ["prof-engine", "query", str(run), "--safe", "select count(*) from slices", "-f", "csv"]
    )
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0 and capsys.readouterr().out.split() == ['"count_star()"', "11"]
