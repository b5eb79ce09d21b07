"""Grouped execution (`engine.grouped`): rank-scope views per group of ranks in worker processes or
Ray tasks, cluster views once over their rows, gives every public view's CSV byte for byte as the
run opened whole does, with one group, two, and several of unequal size."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prof_engine
from conftest import cli_in_process, fixture_path, stored_rows
from prof_engine import _ray
from prof_engine.engine import grouped
from prof_engine.engine.export import SUMMARY_VIEWS, export_views
from prof_engine.engine.views import public_views
from prof_engine.errors import QueryError

REPO = Path(__file__).resolve().parent.parent
VIEWS = [v.name for v in public_views()]
STAMP = "20260101000000"


def _import(src: Path, out: Path) -> Path:
    return Path(prof_engine.import_trace([src], out))


@pytest.fixture(scope="module")
def nccl(nccl_2rank_run) -> Path:
    return nccl_2rank_run


@pytest.fixture(scope="module")
def ascend(tmp_path_factory) -> Path:
    return _import(fixture_path("ascend", "torch_npu_2rank_level1_text"), tmp_path_factory.mktemp("ascend") / "run")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A generated run of 12 ranks (benchmarks/gen_runstore.py), 2,000 device records each, alike
    (ties between ranks in every ordering)."""
    spec = importlib.util.spec_from_file_location("gen_runstore", REPO / "benchmarks" / "gen_runstore.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen  # its dataclasses look their module up there
    spec.loader.exec_module(gen)
    out = tmp_path_factory.mktemp("generated") / "run"
    gen.write(out, gen.Shape(device_records=24_000, ranks=12, steps=4), log=lambda *a: None)
    return out


def _csvs(run: prof_engine.Run, out: Path, views: list[str]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in export_views(run, out, views, "csv", STAMP)}


_WHOLE: dict[tuple[Path, tuple[str, ...]], dict[str, bytes]] = {}  # the run opened whole: one export per run


def _same_csvs(path: Path, tmp: Path, executor: str, ranks_per_task: int, views: list[str] = VIEWS) -> None:
    if (path, tuple(views)) not in _WHOLE:
        with prof_engine.open(path) as whole:
            _WHOLE[path, tuple(views)] = _csvs(whole, tmp / "whole", views)
    expected = _WHOLE[path, tuple(views)]
    with grouped.open_grouped(path, views, executor, ranks_per_task) as run:
        got = _csvs(run, tmp / "grouped", views)
    assert list(got) == list(expected)
    differ = [name for name in expected if got[name] != expected[name]]
    assert not differ, f"{executor}, {ranks_per_task} ranks per task: {differ} differ"


@pytest.mark.parametrize("ranks_per_task", [1, 2], ids=["2 groups", "1 group"])
def test_local_gives_the_whole_runs_csvs_nccl(nccl, tmp_path, ranks_per_task):
    _same_csvs(nccl, tmp_path, "local", ranks_per_task)


def test_local_gives_the_whole_runs_csvs_ascend(ascend, tmp_path):
    _same_csvs(ascend, tmp_path, "local", 1)


def test_local_gives_the_whole_runs_csvs_in_unequal_groups(generated, tmp_path):
    """12 ranks in groups of 5, 5 and 2: every view, cluster_step_trace and slow_rank included."""
    _same_csvs(generated, tmp_path, "local", 5)


def test_local_with_steps_gives_the_whole_runs_rows(nccl):
    """The views of some steps; a step the run lacks is one error, from the driver."""
    with prof_engine.open(nccl) as whole:
        step = whole.sql('SELECT min("Step") FROM step_trace').rows()[0][0]
    names = ["step_trace", "op_statistic", "cluster_step_trace"]
    with prof_engine.open(nccl, steps=[step]) as whole:
        expected = {n: whole.view(n).rows() for n in names}
    with grouped.open_grouped(nccl, names, "local", 1, steps=[step]) as run:
        assert {n: run.view(n).rows() for n in names} == expected
    with pytest.raises(QueryError, match="999"):
        grouped.open_grouped(nccl, names, "local", 1, steps=[999])


def test_plan_groups_ranks_in_order_with_what_cluster_views_require(generated):
    chosen = grouped.plan(generated, ["cluster_step_trace", "op_summary"], ranks_per_task=5)
    assert chosen.groups == ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (10, 11))
    assert set(chosen.rank_views) == {"step_trace", "op_summary"}
    # advice's per-rank findings (`_advice_rank`) by groups, slow_rank's comparison in the driver
    assert grouped.plan(generated, ["advice"]).rank_views == ("step_trace", "_advice_rank")
    assert grouped.plan(generated, ["op_summary"], ranks=[3, 1], ranks_per_task=1).groups == ((1,), (3,))
    # by default, one group per CPU, up to RANKS_PER_TASK ranks each
    assert grouped.plan(generated, ["op_summary"], cpus=5).groups == ((0, 1, 2), (3, 4, 5), (6, 7, 8), (9, 10, 11))
    assert len(grouped.plan(generated, ["op_summary"], cpus=64).groups) == 12


def test_plan_refuses_what_it_cannot_do(generated):
    with pytest.raises(QueryError, match="unknown view 'nope'"):
        grouped.plan(generated, ["nope"])
    with pytest.raises(QueryError, match="not a positive number"):
        grouped.plan(generated, ["op_summary"], ranks_per_task=0)
    with pytest.raises(QueryError, match="unknown executor 'spark'"):
        grouped.open_grouped(generated, ["op_summary"], "spark")
    with pytest.raises(QueryError, match="--address names a Ray cluster"):
        grouped.open_grouped(generated, ["op_summary"], "local", address="ray://head:10001")


def test_open_with_an_executor_answers_from_the_groups(generated, monkeypatch, tmp_path):
    """`prof_engine.open(executor=...)`: each query's rank-scope views computed by groups the
    first time it reads them, under --safe too (the groups' files are readable to it)."""
    queries = ["SELECT * FROM slow_rank", 'SELECT "Rank", count(*) FROM op_summary GROUP BY 1 ORDER BY 1']
    with prof_engine.open(generated) as whole:
        expected = [whole.sql(q).rows() for q in queries]
        summary = {title: r.rows() for title, r in whole.summary(3).items()}
        quality = whole.quality().rows()
        page = whole.report(tmp_path / "whole.html").read_bytes()
    local = grouped.GroupedRun._run_local
    with prof_engine.open(generated, executor="local", ranks_per_task=5, read_only_sql=True) as run:
        assert [run.sql(q).rows() for q in queries] == expected
        reads = dict(run.sql("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").rows())
        assert "prof-engine-groups-" in reads["op_summary"] and "prof-engine-groups-" in reads["step_trace"]
        assert "prof-engine-groups-" not in reads["op_statistic"]  # no query read it yet
        rounds, pool = [], run._pool
        monkeypatch.setattr(grouped.GroupedRun, "_run_local", lambda r, c: rounds.append(c.rank_views) or local(r, c))
        assert {title: r.rows() for title, r in run.summary(3).items()} == summary
        assert run.quality().rows() == quality
        assert run.report(tmp_path / "grouped.html").read_bytes() == page
        assert len(rounds) == 1 and "data_quality" in rounds[0]  # show: one round of tasks
        assert run._pool is pool is not None  # the same workers, round after round
    assert run._pool is None
    with pytest.raises(QueryError, match="go with --executor"):
        prof_engine.open(generated, ranks_per_task=5)


def test_order_by_is_the_top_level_one():
    sql = "SELECT a FROM (SELECT a FROM t ORDER BY b) -- ORDER BY c\nWHERE x = 'ORDER BY d' ORDER BY \"Rank\", a"
    assert grouped._order_by(sql) == '"Rank", a'
    assert grouped._order_by("SELECT a FROM (SELECT a FROM t ORDER BY b)") is None
    assert grouped._rank_first("r.rank, r.device") and not grouped._rank_first('"Level" DESC, "Rank"')


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`prof-engine ARGS` in this process (the executor's workers are processes all the same)."""
    return cli_in_process(cwd, *args)


def _process(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prof_engine", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_cli_export_executor_local_writes_the_same_files(nccl, tmp_path):
    plain = _cli(tmp_path, "export", nccl, "-o", "plain")
    assert plain.returncode == 0, plain.stderr
    local = _cli(tmp_path, "export", nccl, "-o", "local", "--executor", "local", "--ranks-per-task", "1")
    assert local.returncode == 0, local.stderr
    stem = {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in (tmp_path / "plain").iterdir()}
    assert sorted(stem) == sorted(SUMMARY_VIEWS)
    assert {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in (tmp_path / "local").iterdir()} == stem


def test_cli_executor_ray_without_ray_is_one_line(nccl, tmp_path):
    """Where `import ray` fails (here: a `ray` package that raises ImportError first on the path)."""
    (tmp_path / "noray" / "ray").mkdir(parents=True)
    (tmp_path / "noray" / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "noray"), os.environ.get("PYTHONPATH", "")]))
    proc = _process(tmp_path, "export", nccl, "-o", "out", "--executor", "ray", env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"Error: {_ray.RAY_MISSING}"
    alone = _cli(tmp_path, "export", nccl, "-o", "out", "--address", "ray://head:10001")
    assert alone.returncode == 2 and "go with" in alone.stderr  # a usage error, in typer's box
    assert _ray.RAY_MISSING == "--executor ray needs Ray: pip install 'prof-engine[ray]'"


def test_cli_query_show_with_an_executor_print_what_they_print_without(nccl, tmp_path):
    """The commands' options reach GroupedRun (check's and report's are the same; their rows and
    page: the test above)."""
    sql = "SELECT * FROM advice ORDER BY ALL"
    for args in (["query", nccl, sql, "-f", "csv"], ["show", nccl, "--wide"]):
        plain = _cli(tmp_path, *args)
        local = _cli(tmp_path, *args, "--executor", "local", "--ranks-per-task", "2")
        assert plain.returncode == 0 and local.returncode == 0, local.stderr
        assert local.stdout == plain.stdout and len(plain.stdout.splitlines()) > 2, args


def test_cli_help_states_the_default_ranks_per_task():
    proc = _cli(REPO, "export", "--help")
    assert f"{grouped.RANKS_PER_TASK} at most)" in " ".join(proc.stdout.replace("│", " ").split())


@pytest.fixture(scope="module")
def ray():
    try:
        import ray
    except ImportError as e:
        pytest.skip(f"Ray is not installed (pip install 'prof-engine[ray]'): {e}")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


# One Ray test: a Ray start costs ~9 s of the suite and its daemons take CPU while they live; the
# executors share the plan and the task, which the local tests cover fixture by fixture.
def test_ray_imports_and_answers_as_one_process_does(ray, generated, tmp_path):
    # rank views of each kind (per task, per step) and the cluster views over them: every view is
    # checked through the same plan by the local tests
    _same_csvs(generated, tmp_path, "ray", 5, ["op_summary", "step_trace", "cluster_step_trace", "slow_rank"])
    # the import: a task per trace, the same tables; a corrupt trace among them is left out and listed
    traces = sorted(fixture_path("kineto", "hta_sampled_2rank_nccl").glob("*.json.gz"))
    (tmp_path / "broken.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1', encoding="utf-8")
    plain = prof_engine.import_trace(traces, tmp_path / "plain", jobs=1)
    via_ray = prof_engine.import_trace([*traces, tmp_path / "broken.json"], tmp_path / "ray", executor="ray")
    manifests = [json.loads((run / "manifest.json").read_text(encoding="utf-8")) for run in (plain, via_ray)]
    assert manifests[0]["tables"] == manifests[1]["tables"] and manifests[1]["ranks"] == [0, 1]
    [skipped] = manifests[1]["skipped"]
    assert "broken.json" in skipped["error"]
    tables = {d.name for run in (plain, via_ray) for d in run.iterdir() if d.is_dir()}
    assert {t: stored_rows(plain, t) for t in tables} == {t: stored_rows(via_ray, t) for t in tables}


def test_import_executor_options_are_checked_in_one_line(tmp_path):
    trace = next(fixture_path("kineto", "hta_sampled_2rank_nccl").glob("*.json.gz"))
    for args, message in (
        (["--executor", "ray", "--jobs", "2"], "Ray schedules by its CPUs"),
        (["--address", "ray://head:10001"], "go with --executor"),
        (["--executor", "spark"], "unknown executor 'spark'"),
    ):
        proc = _cli(tmp_path, "import", trace, "-o", "run", *args)
        said = " ".join(proc.stderr.replace("│", " ").split())  # typer's box, its lines joined
        assert proc.returncode != 0 and message in said, (args, proc.stderr)
        assert not (tmp_path / "run").exists()
    local = _cli(tmp_path, "import", trace, "-o", "run", "--executor", "local")
    assert local.returncode == 0 and (tmp_path / "run" / "manifest.json").is_file(), local.stderr


def test_a_task_that_does_not_see_the_drivers_directory_returns_bytes(nccl, tmp_path):
    """Ray tasks on a node without the driver's file system (here: a token that is not there)
    return their files' bytes, the same files they would have written in place."""
    from prof_engine.importers import Source, import_unit_task

    trace = next(fixture_path("kineto", "hta_sampled_2rank_nccl").glob("*.json.gz"))
    token = _ray.mark(tmp_path / "unit")
    assert _ray.shares(str(tmp_path / "unit"), token) and not _ray.shares(str(tmp_path / "unit"), "another")
    here = import_unit_task(Source(trace, "chrome"), 0, str(tmp_path / "unit"), token, None, 1)
    away = import_unit_task(Source(trace, "chrome"), 0, str(tmp_path / "away"), token, None, 1)
    assert isinstance(here, tuple) and len(here) == 2 and isinstance(away, tuple) and len(away) == 3
    assert away[:2] == here and not (tmp_path / "away").exists()
    written = sorted(str(p.parent.relative_to(tmp_path / "unit")) for p in (tmp_path / "unit").rglob("*.parquet"))
    assert sorted(str(Path(n).parent) for n in away[2] if n.endswith(".parquet")) == written and written
    task = grouped._Task(str(nccl), (1,), ("op_statistic",), None, 1, str(tmp_path / "away"), "not-there")
    [data] = grouped.compute_group(task).values()
    assert isinstance(data, bytes) and data[:4] == b"PAR1" and not (tmp_path / "away").exists()


def test_a_dead_ray_worker_is_one_line():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'prof-engine[ray]')")
    error = _ray.task_error(ray, ray.exceptions.WorkerCrashedError())
    assert error is not None and str(error).startswith("a Ray worker died (out of memory?)")
    assert _ray.task_error(ray, ValueError("a bug")) is None
