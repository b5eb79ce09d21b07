"""Every view declares its scope, and a view of scope `rank` gives, on a run restricted to some
ranks, exactly the whole run's rows of those ranks (what lets groups of ranks be computed apart)."""

from __future__ import annotations

from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path
from prof_engine.engine.grouped import _rank_views
from prof_engine.engine.views import SCOPES, definitions, parse, public_views

FIXTURES = {"nccl": ("kineto", "hta_sampled_2rank_nccl"), "ascend": ("ascend", "torch_npu_2rank_level1_text")}
RANK_VIEWS = [v.name for v in public_views() if v.scope == "rank"]
# private rank-scope views the cluster views and `show` read: grouped execution computes them by groups too
GROUPED_PRIVATE = [n for n in _rank_views([*(v.name for v in public_views()), "_summary"]) if n.startswith("_")]


def test_every_view_declares_a_scope():
    assert {v.scope for v in definitions().values()} <= set(SCOPES)
    assert {"slow_rank", "cluster_step_trace"} <= {n for n, v in definitions().items() if v.scope == "cluster"}


def test_a_view_that_requires_a_cluster_view_is_cluster_scope():
    defs = definitions()
    for v in defs.values():
        cluster_deps = [d for d in v.requires if d in defs and defs[d].scope == "cluster"]
        assert v.scope == "cluster" or not cluster_deps, (
            f"queries/{v.name}.sql is rank scope but requires {cluster_deps}"
        )


def test_a_view_file_without_a_valid_scope_is_an_error(tmp_path, monkeypatch):
    from prof_engine.engine import views

    (tmp_path / "queries").mkdir()
    path = tmp_path / "queries" / "v.sql"
    path.write_text("-- answers: a test.\n-- requires: slices\n-- scope: node\nSELECT 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"queries/v\.sql: scope 'node'"):
        parse(path)
    path.write_text("-- answers: a test.\n-- requires: slices\nSELECT 1\n", encoding="utf-8")
    assert parse(path).scope == ""  # a comparison's file (queries/compare/) declares none
    monkeypatch.setattr(views, "data_dir", lambda name: tmp_path / name)
    with pytest.raises(ValueError, match=r"queries/v\.sql: no `-- scope:` line"):
        views.definitions.__wrapped__()


@pytest.fixture(scope="module", params=list(FIXTURES))
def runs(request, tmp_path_factory):
    """(whole run, {rank: the run opened restricted to that rank}) of a 2-rank fixture."""
    src = fixture_path(*FIXTURES[request.param])
    path = prof_engine.import_trace([src], Path(tmp_path_factory.mktemp(request.param)) / "run")
    whole = prof_engine.open(path)
    alone = {r: prof_engine.open(path, ranks=[r]) for r in whole.manifest["ranks"]}
    assert len(alone) == 2
    yield whole, alone
    for run in (whole, *alone.values()):
        run.close()


def _sorted_rows(result: prof_engine.Result) -> list[tuple]:
    return sorted(result.rows(), key=repr)


@pytest.mark.parametrize("view", RANK_VIEWS + GROUPED_PRIVATE)
def test_rank_scope_view_restricted_to_a_rank_equals_its_rows_of_the_whole_run(runs, view):
    """Each rank-scope view has a `Rank` column (the test fails for one without: it would have no
    rows of a rank to compare); its rows on the run of rank r alone are the whole run's WHERE Rank = r."""
    whole, alone = runs
    columns = [c.lower() for c in whole.sql(f'SELECT * FROM "{view}" LIMIT 0').columns]
    assert "rank" in columns, f"{view}: rank scope without a Rank column"
    for rank, run in alone.items():
        expected = _sorted_rows(whole.sql(f'SELECT * FROM "{view}" WHERE "Rank" = ?', [rank]))
        assert _sorted_rows(run.sql(f'SELECT * FROM "{view}"')) == expected, f"{view}, rank {rank}"
