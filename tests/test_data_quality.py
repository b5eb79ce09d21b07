"""What the import guessed is said: the `data_quality` view, `prof-engine check`, import warnings
and `--strict`, and the rank rules (invented ranks, duplicate sources, missing ranks). Every
expected count is written out from the synthetic trace the test builds, not from the view's SQL."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import prof_engine
from conftest import cli_in_process, fixture_path, write_trace, x


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`prof-engine ARGS` in `cwd`, through the console script's `main` in this process."""
    return cli_in_process(cwd, *args)


def _kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=7, correlation=correlation, device=0, stream=7)


def _guessing_trace(path: Path) -> Path:
    """Two steps whose kernels overlap (step 1's last kernel ends after step 2's first starts),
    one kernel whose launch is missing, two records of a category no profiler writes and one of
    no category."""
    return write_trace(
        path,
        [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"),
            x("aten::mm", 10, 20, **{"External id": 1}),
            x("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=11, **{"External id": 1}),
            _kernel("gemm", 20, 150, 11),  # runs until 170: into step 2's device span
            x("ProfilerStep#2", 100, 100, cat="user_annotation"),
            x("aten::add", 110, 10, **{"External id": 2}),
            x("cudaLaunchKernel", 111, 2, cat="cuda_runtime", correlation=12, **{"External id": 2}),
            _kernel("add", 120, 10, 12),  # step 2's span starts at 120 < 170
            _kernel("orphan", 180, 5, 99),  # correlation 99: no launch in the trace
            x("mystery", 130, 5, cat="my_own_category"),
            x("mystery", 140, 5, cat="my_own_category"),
            {k: v for k, v in x("nameless", 150, 5).items() if k != "cat"},  # no category at all
        ],
    )


def _rules(run) -> dict[str, tuple]:
    return {r[2]: r for r in run.quality().rows()}


def test_data_quality_counts_what_the_tables_show(tmp_path):
    run_dir = prof_engine.import_trace([_guessing_trace(tmp_path / "t.json")], tmp_path / "run")
    with prof_engine.open(run_dir) as run:
        rules = _rules(run)
        # (rank, device, rule, count, total, share, detail, meaning)
        other = rules["other_records"]
        assert other[:5] == (0, "host", "other_records", 1, 9)  # 1 of the 9 host records
        assert "nameless" in other[6]
        unknown = rules["unknown_categories"]  # counted once, by the importer that knows categories
        assert unknown[2:4] == ("unknown_categories", 2) and "my_own_category" in unknown[6]
        unlinked = rules["unlinked_device_records"]
        assert unlinked[:5] == (0, "gpu0", "unlinked_device_records", 1, 3)
        overlap = rules["overlapping_device_steps"]
        assert overlap[:5] == (0, "gpu0", "overlapping_device_steps", 1, 2)
        # step 1's span [20, 170) and step 2's [120, 185) (the orphan at 180 is in its host step):
        # 50 µs in both, of the 165 µs they cover
        assert overlap[6] == "from step 1: 50.0 µs of 165.0 µs held by two steps"
        assert all(r[7] for r in rules.values())  # every rule says what it means
        # a single trace with no rank is rank 0: nothing invented
        assert "invented_rank" not in rules


def test_a_clean_trace_fires_no_rule(tmp_path):
    trace = write_trace(
        tmp_path / "t.json",
        [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"),
            x("aten::mm", 10, 20, **{"External id": 1}),
            x("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=11, **{"External id": 1}),
            _kernel("gemm", 20, 30, 11),
        ],
        distributedInfo={"rank": 0, "world_size": 1},
    )
    proc = cli(tmp_path, "import", trace, "-o", "run", "--strict")
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr
    proc = cli(tmp_path, "check", "run", "--strict")
    assert proc.returncode == 0 and "no data-quality rule fired" in proc.stdout
    # a base time the trace gives is a note (how the data was read), listed but never a warning
    write_trace(
        trace,
        [x("aten::mm", 10, 20)],
        distributedInfo={"rank": 0, "world_size": 1},
        baseTimeNanoseconds=1_700_000_000_000_000_000,
    )
    proc = cli(tmp_path, "import", trace, "-o", "run2", "--strict")
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    with prof_engine.open(tmp_path / "run2") as run:
        assert [r[2:5] + r[8:] for r in run.quality().rows()] == [("clock_anchor", 1, None, "note")]
        assert run.quality_warnings() == []
    assert cli(tmp_path, "check", "run2", "--strict").returncode == 0


def test_import_warns_once_per_rule_and_strict_fails(tmp_path):
    _guessing_trace(tmp_path / "t.json")
    proc = cli(tmp_path, "import", "t.json", "-o", "run")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("Warning: ")]
    assert sorted(w.split(":")[1].strip() for w in warnings) == [
        "other_records",
        "overlapping_device_steps",
        "unknown_categories",
        "unlinked_device_records",
    ]
    assert "Warning: other_records: 1 of 9 (11.11 %) on r0:host" in proc.stderr
    assert "prof-engine check run" in proc.stderr
    assert cli(tmp_path, "import", "t.json", "-o", "run2", "--strict").returncode == 1
    assert (tmp_path / "run2" / "manifest.json").is_file()  # the run is whole; the exit code says it guessed
    proc = cli(tmp_path, "check", "run")
    assert proc.returncode == 0 and "overlapping_device_steps" in proc.stdout and "Traceback" not in proc.stderr
    assert cli(tmp_path, "check", "run", "--strict").returncode == 1
    # show and info put it first / in a line
    assert "Data quality" in cli(tmp_path, "show", "run").stdout.split("Step breakdown")[0]
    assert "overlapping_device_steps" in cli(tmp_path, "info", "run").stdout


def test_ranks_by_file_order_are_said_to_be_invented(tmp_path):
    a = write_trace(tmp_path / "a.json", [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 1, 2)])
    b = write_trace(tmp_path / "b.json", [x("ProfilerStep#1", 0, 90, cat="user_annotation"), x("aten::mm", 1, 3)])
    with prof_engine.open(prof_engine.import_trace([a, b], tmp_path / "run")) as run:
        invented = [r for r in run.quality().rows() if r[2] == "invented_rank"]
        assert [(r[0], r[3]) for r in invented] == [(0, 1), (1, 1)]
        assert [s["info"]["rank_from"] for s in run.manifest["sources"]] == ["file order", "file order"]
    # ranks the traces name are not guesses
    a = write_trace(tmp_path / "a.json", [x("aten::mm", 1, 2)], distributedInfo={"rank": 1, "world_size": 2})
    b = write_trace(tmp_path / "b.json", [x("aten::mm", 1, 3)], distributedInfo={"rank": 0, "world_size": 2})
    with prof_engine.open(prof_engine.import_trace([a, b], tmp_path / "run2")) as run:
        assert len(run.quality()) == 0
        assert [s["info"]["rank_from"] for s in run.manifest["sources"]] == ["distributedInfo.rank"] * 2


def test_the_same_trace_twice_is_refused(tmp_path):
    a = write_trace(tmp_path / "a.json", [x("aten::mm", 1, 2), x("aten::add", 5, 2)])
    shutil.copy(a, tmp_path / "copy.json")
    for args in (["a.json", "a.json"], ["a.json", "copy.json"]):
        proc = cli(tmp_path, "import", *args, "-o", "run")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("Error: ") and "same trace" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "run").exists()
    # a directory holding both: the same refusal
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(a, d / "r0.json")
    shutil.copy(a, d / "r1.json")
    with pytest.raises(prof_engine.InputError, match="same trace"):
        prof_engine.import_trace([d], tmp_path / "run")
    # the same first and last 64 KiB but other bytes between: not a copy
    big = [x(f"op{i}", i, 1) for i in range(20000)]
    write_trace(tmp_path / "big1.json", big)
    big[10000] = x("op10001", 10000, 1)  # the same length, another name
    write_trace(tmp_path / "big2.json", big)
    assert (tmp_path / "big1.json").stat().st_size == (tmp_path / "big2.json").stat().st_size
    prof_engine.import_trace([tmp_path / "big1.json", tmp_path / "big2.json"], tmp_path / "run3")


def test_a_config_file_beside_the_traces_changes_no_rank(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a_config.json").write_text('{"lr": 0.1, "batch": 8}', encoding="utf-8")  # sorts first
    write_trace(d / "b_trace.json", [x("aten::mm", 1, 2)])
    with prof_engine.open(prof_engine.import_trace([d], tmp_path / "run")) as run:
        assert run.manifest["ranks"] == [0]
        assert [Path(s["path"]).name for s in run.manifest["sources"]] == ["b_trace.json"]
        assert run.manifest["skipped"] == []


def test_missing_ranks_of_a_job_are_said(tmp_path):
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")  # ranks 0 and 1 of a 128-rank job
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        (missing,) = [r for r in run.quality().rows() if r[2] == "missing_ranks"]
        assert missing[:5] == (None, None, "missing_ranks", 126, 128)


# Every fixture folder, by name (the folders themselves are read in the test: absent in a clone).
FIXTURE_FOLDERS = {
    "kineto": (
        "hta_amd_mi250_rocm",
        "hta_nccl_parser_rank0_ws2",
        "hta_sampled_2rank_nccl",
        "kineto_v100_resnet50_2021",
        "rccl_mi300x_resnet_3step",
    ),
    "chrome": (
        "catapult_flow",
        "catapult_main_thread_has_unclosed_slices",
        "catapult_nestable_async",
        "catapult_x_event_trace",
    ),
    "ascend": (
        "mindspore_legacy_4rank_pipeline_parallel",
        "msprof_analyze_test_resources",
        "msprof_cann7_2device_timeline_legacy",
        "msprof_ut_collection_metadata",
        "torch_npu_2023_2rank_and_cluster_output_16rank",
        "torch_npu_2rank_level0_text",
        "torch_npu_2rank_level1_db",
        "torch_npu_2rank_level1_text",
    ),
}
# metadata, derived reports and tick-clocked summaries: no trace to import, each says so
REFUSED = {"msprof_ut_collection_metadata", "msprof_analyze_test_resources", "mindspore_legacy_4rank_pipeline_parallel"}


def test_the_fixture_folders_are_those_listed():
    root = fixture_path()
    on_disk = {g: tuple(sorted(p.name for p in (root / g).iterdir() if p.is_dir())) for g in FIXTURE_FOLDERS}
    assert on_disk == FIXTURE_FOLDERS


@pytest.mark.parametrize(("group", "name"), [(g, n) for g, names in FIXTURE_FOLDERS.items() for n in names])
def test_every_fixture_folder_imports_or_says_why_and_is_checked(tmp_path, group, name):
    """Every fixture folder imports into a run whose data_quality answers (in-process: the CLI's
    `check` is the same call, tested above), or is refused with a one-line reason; and `show`
    prints each run within two screens at 120 columns (test_i38_show's rule: the folders are
    shown here, where they are imported anyway; the single traces of a folder there)."""
    from test_i38_show import MAX_LINES, WIDTH, show

    folder = fixture_path(group, name)
    try:
        run_dir = prof_engine.import_trace([folder], tmp_path / "run", jobs=1)
    except prof_engine.ProfEngineError as e:
        assert name in REFUSED, (folder, e)
        assert "\n" not in str(e) and str(folder) in str(e), (folder, e)
        return
    assert name not in REFUSED, f"{folder} imported: a folder with no trace must be refused"
    with prof_engine.open(run_dir) as run:
        run.quality_warnings()  # answers, whatever it finds
        assert run.manifest["tables"]["slices"] > 0, folder
    lines = show(run_dir).splitlines()
    assert len(lines) <= MAX_LINES and max(map(len, lines)) <= WIDTH, (folder, len(lines), max(map(len, lines)))


def test_host_records_that_overlap_without_nesting_are_counted(tmp_path):
    trace = write_trace(
        tmp_path / "t.json",
        [
            x("outer", 0, 100),
            x("a", 10, 30),  # 10..40
            x("b", 30, 20),  # 30..50: starts inside a, ends after it
            x("c", 60, 10),  # nested in outer, after both
            x("d", 62, 2),  # inside c: nests
        ],
        distributedInfo={"rank": 0, "world_size": 1},
    )
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        (row,) = [r for r in run.quality().rows() if r[2] == "overlapping_host_records"]
        assert row[:5] == (0, "host", "overlapping_host_records", 1, 5) and row[6] == "e.g. b"


def test_a_run_creates_the_views_its_queries_name_and_what_they_require(tmp_path):
    """Views are created when a query first names them (creating all took ~0.25 s of every open);
    a query of DuckDB's catalog sees every view."""
    from prof_engine.engine.views import public_views

    run_dir = prof_engine.import_trace([_guessing_trace(tmp_path / "t.json")], tmp_path / "run")
    listed = "SELECT view_name FROM duckdb_views() WHERE NOT internal"
    with prof_engine.open(run_dir) as some:
        rows = some.quality().rows()
        created = {name for (name,) in some.con.execute(listed).fetchall()}  # `con`: no catalog words seen
        assert {"data_quality", "_overlap", "_step_overlaps"} <= created and "op_statistic" not in created
        assert {v.name for v in public_views()} <= {name for (name,) in some.sql(listed).rows()}
    with prof_engine.open(run_dir) as whole:
        whole.sql("SELECT * FROM information_schema.tables")
        assert whole.quality().rows() == rows
    with prof_engine.open(run_dir) as run:  # SQL run from a string names its views in a literal
        assert run.sql("SELECT * FROM query_table('data_quality')").rows() == rows
