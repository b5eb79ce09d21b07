"""Runs opened restricted to some ranks (`prof_engine.open(path, ranks=[...])`, `--rank`): a table's
files are under `<table>/rank=<r>/device=<d>/`, and a restricted run lists and reads only its ranks'."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import prof_engine
from conftest import write_trace, x
from prof_engine import QueryError

BASE = 1_700_000_000_000_000  # µs


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """Ranks 0, 1 and 2 of a job of 4 (so the run has a finding of no rank: missing_ranks), each one
    step with a kernel on gpu0 that takes longer on higher ranks."""
    d = tmp_path_factory.mktemp("ranks")
    for rank in range(3):
        events = [
            x("ProfilerStep#3", BASE, 1000, cat="user_annotation"),
            x("aten::mm", BASE + 5, 300 + rank),
            x("gemm", BASE + 10, 200 + 10 * rank, cat="kernel", pid=0, tid=7, device=0, stream=7),
        ]
        write_trace(d / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 4})
    return prof_engine.import_trace([d], d / "run", jobs=1)


def test_every_table_is_stored_by_rank_then_device(run):
    for table in ("slices", "lanes", "lane_totals"):
        dirs = {p.parent.relative_to(run / table).as_posix() for p in (run / table).rglob("*.parquet")}
        assert {d.split("/")[0] for d in dirs} == {"rank=0", "rank=1", "rank=2"}, table
        assert all(len(d.split("/")) == 2 and d.split("/")[1].startswith("device=") for d in dirs), dirs


def test_a_restricted_run_holds_only_its_ranks_rows_and_manifest_tables(run):
    with prof_engine.open(run) as whole:
        (finding_ranks,) = whole.sql("SELECT list(DISTINCT rank) FROM run_findings").rows()[0]
        assert None in finding_ranks  # missing_ranks: about the run, of no rank
        whole_tables = whole.manifest["tables"]
    with prof_engine.open(run, ranks=[2, 0]) as r:
        assert r.ranks == [0, 2] and r.manifest["ranks"] == [0, 2]
        for table in ("slices", "lanes", "lane_totals", "run_ranks", "run_devices"):
            assert r.sql(f"SELECT DISTINCT rank FROM {table} ORDER BY 1").rows() == [(0,), (2,)], table
        assert r.sql("SELECT count(*) FROM run_findings WHERE rank IS NULL OR rank NOT IN (0, 2)").rows() == [(0,)]
        assert r.sql('SELECT DISTINCT "Rank" FROM op_statistic ORDER BY 1').rows() == [(0,), (2,)]
        # a cluster view compares the ranks of the restricted run only
        assert r.sql('SELECT DISTINCT "Index" FROM cluster_step_trace WHERE "Type" = \'stage\'').rows() == [("(0, 2)",)]
        # the manifest counts these ranks' rows: what info and the run's repr show
        for table, rows in r.manifest["tables"].items():
            if table in ("slices", "lanes", "lane_totals", "flows"):
                assert r.sql(f"SELECT count(*) FROM {table}").rows() == [(rows,)], table
        assert r.manifest["tables"]["slices"] < whole_tables["slices"] and "6 records" in repr(r)


def test_a_restricted_run_reads_nothing_of_the_other_ranks(run, tmp_path):
    """The other ranks' files made unreadable: the whole run fails to answer, rank 1's alone gives
    the same rows as before (none of the others' files is opened, nor its footer read)."""
    with prof_engine.open(run, ranks=[1]) as r:
        before = {v: sorted(r.view(v).rows(), key=repr) for v in ("op_statistic", "step_trace", "overlap")}
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    for other in [*copy.glob("*/rank=0/**/*.parquet"), *copy.glob("*/rank=2/**/*.parquet")]:
        other.write_bytes(b"not parquet")
    with prof_engine.open(copy, ranks=[1]) as r:
        assert {v: sorted(r.view(v).rows(), key=repr) for v in before} == before
    with pytest.raises(QueryError):
        with prof_engine.open(copy) as r:
            r.view("op_statistic")


def test_an_unknown_rank_is_one_line_listing_the_runs_ranks(run):
    with pytest.raises(QueryError, match=r"no ranks 5, 7 in this run \(its ranks: 0, 1, 2\)$"):
        prof_engine.open(run, ranks=[7, 5, 1])


def test_the_cli_takes_ranks(run):
    from prof_engine.cli import app

    result = CliRunner().invoke(
        app,
        ["query", str(run), "SELECT DISTINCT rank FROM slices ORDER BY 1", "-r", "2", "--rank", "1", "--format", "csv"],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ['"rank"', "1", "2"]
    result = CliRunner().invoke(app, ["show", str(run), "-r", "9"])  # the entry point prints it as `Error: ...`
    assert isinstance(result.exception, QueryError) and "no rank 9 in this run" in str(result.exception)
