"""The run API (`engine.options`, `engine.session`): one `RunOptions`, checked as it is built, and
`show`'s summary computing each table once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import prof_engine
from conftest import fixture_path
from prof_engine.engine.grouped import GroupedRun
from prof_engine.engine.options import RunOptions
from prof_engine.engine.session import QUALITY_TITLE, Run
from prof_engine.errors import QueryError


@pytest.fixture(scope="module")
def nccl(tmp_path_factory) -> Path:
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    return Path(prof_engine.import_trace([src], tmp_path_factory.mktemp("nccl") / "run"))


def test_run_options_are_normalised_and_checked_once_built():
    options = RunOptions(steps=(3, 1), ranks=(3, 1, 3), executor="local", ranks_per_task=2)
    assert options.steps == (3, 1) and options.ranks == (1, 3)  # steps as given; ranks sorted, once each
    assert RunOptions(steps=(), ranks=()) == RunOptions()  # none asked for: all
    for kwargs, message in (
        ({"executor": "spark"}, "unknown executor 'spark'; use local or ray"),
        ({"ranks_per_task": 5}, "these options go with --executor: --ranks-per-task"),
        ({"address": "ray://head:10001"}, "these options go with --executor: --address"),
        ({"executor": "local", "address": "ray://head:10001"}, "--address names a Ray cluster"),
        ({"executor": "local", "ranks_per_task": 0}, "ranks per task: 0 is not a positive number of ranks"),
    ):
        with pytest.raises(QueryError, match=message):
            RunOptions(**kwargs)


def test_open_builds_the_options_and_picks_the_run(nccl):
    with prof_engine.open(nccl, [552], ranks=[1]) as run:
        assert type(run) is Run and run.options == RunOptions(steps=(552,), ranks=(1,))
        assert run.steps == [552] and run.ranks == [1]
    with prof_engine.open(nccl, executor="local", ranks_per_task=1) as run:
        assert isinstance(run, GroupedRun) and (run.executor, run.ranks_per_task) == ("local", 1)
    with pytest.raises(QueryError, match="go with --executor"):
        prof_engine.open(nccl, address="ray://head:10001")


class _Counting:
    """A connection that records the queries a `Run` runs (`Run.sql`: `con.sql`)."""

    def __init__(self, con: Any) -> None:
        self._con, self.queries = con, []

    def sql(self, query: str, **kwargs: Any) -> Any:
        self.queries.append(query)
        return self._con.sql(query, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def test_show_computes_each_table_once(nccl):
    """`show` (`Run.summary`): data_quality read once (its warnings and their table from the same
    rows), each summary table macro run once, its rows counted from that run, not by a second
    query. The fixture has a warning, and tables longer than `top`, so every path is taken."""
    with prof_engine.open(nccl) as run:
        real = run.con
        run.con = counting = _Counting(real)  # type: ignore[assignment]
        tables = run.summary(1)
        run.con = real
        # what the summary says the tables hold in full: what they hold
        totals = {
            "Top 1 ops by total duration": "summary_top_ops",
            "Top 1 op types (op_statistic)": "summary_op_types",
            "Advice (advice: what to look at first)": "summary_advice",
        }
        for title, macro in totals.items():
            assert len(tables[title]) == 1 < tables[title].total
            assert tables[title].total == run.sql(f"SELECT count(*) FROM {macro}(NULL)").rows()[0][0]
        warned = run.sql("SELECT * FROM data_quality WHERE \"Level\" = 'warning'")
    assert QUALITY_TITLE in tables and len(tables[QUALITY_TITLE]) == len(warned) > 0
    assert counting.queries == [
        "SELECT * FROM data_quality",
        "SELECT * FROM summary_steps(NULL)",
        "SELECT * FROM summary_top_ops(NULL)",
        "SELECT * FROM summary_op_types(NULL)",
        "SELECT * FROM summary_apis(NULL)",
        "SELECT * FROM summary_advice(NULL)",
    ]


def test_what_a_query_reads_is_duckdbs_parse_of_it():
    """`views.reads`: table references and function calls of DuckDB's parse tree; a column,
    comment or string that spells a view's name is no read of it."""
    import duckdb

    from prof_engine.engine.views import defining, reads

    con = duckdb.connect()
    found = reads(con, "SELECT \"op_summary\".x FROM step_trace -- slow_rank\nWHERE y = 'overlap'")
    assert found is not None and defining(found.names) == ["step_trace"] and not found.catalog
    assert defining(found.in_strings) == ["overlap"]  # created, not computed (`Run._ready`)
    found = reads(con, "SELECT * FROM summary_top_ops(3) WHERE is_device_task(x)")
    assert found is not None and defining(found.names) == ["_classify", "_summary"]
    found = reads(con, "SELECT * FROM query('SELECT * FROM advice'), query_table('data_quality')")
    assert found is not None and set(defining(found.in_strings)) == {"advice", "data_quality"}
    for sql in ("SHOW TABLES", "FROM duckdb_views()", "SELECT * FROM information_schema.tables"):
        assert (found := reads(con, sql)) is not None and found.catalog, sql
    assert (found := reads(con, "DESCRIBE op_summary")) is not None and defining(found.names) == ["op_summary"]
    assert reads(con, "COPY (SELECT 1) TO 'x.csv'") is None  # bound instead (`Run._bind`)
    assert reads(con, "SELEC 1") is None


def test_a_query_creates_what_it_reads(nccl, tmp_path):
    """Only what a query reads is created; statements the parser does not serialise (EXPLAIN,
    COPY, PRAGMA) read the views they name too."""
    listed = "SELECT view_name FROM duckdb_views() WHERE NOT internal AND view_name = ?"
    with prof_engine.open(nccl) as run:
        run.sql('SELECT 1 AS "op_summary"')
        assert not run.con.execute(listed, ["op_summary"]).fetchall()  # a column is no read
        out = tmp_path / "slow.csv"
        run.sql(f"COPY (SELECT * FROM slow_rank) TO '{out}'")
        assert out.read_text(encoding="utf-8").count("\n") == 1 + len(run.view("slow_rank"))
        assert len(run.sql("EXPLAIN SELECT * FROM overlap")) == 1
        assert len(run.sql("EXPLAIN ANALYZE SELECT * FROM op_statistic")) == 1
    with prof_engine.open(nccl) as run:
        assert "advice" in {name for (name, *_) in run.sql("PRAGMA show_tables").rows()}
