"""Legacy Ascend outputs: msprof PROF_* timelines import exactly; the other legacy folders fail in one line.

Every expected number is recomputed here from the fixture's raw JSON with the json module (times
as exact Decimals), not taken from prof-engine.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

import prof_engine
from conftest import cli_in_process, fixture_path, load_events

PROF = ("ascend", "msprof_cann7_2device_timeline_legacy")
COMPUTE = {"AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"}
SUPPORTED = (
    "prof-engine imports Chrome/Kineto traces (*.json, *.json.gz), torch_npu/MindSpore "
    "*_ascend_pt|*_ascend_ms directories (text or .db) and msprof PROF_* directories"
)


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`prof-engine ARGS` in `cwd`, through the console script's `main` in this process."""
    return cli_in_process(cwd, *args)


def ns(us: Decimal | float | str) -> int:
    return int((Decimal(str(us)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def device_dirs() -> list[Path]:
    return sorted(fixture_path(*PROF).glob("PROF_*/device_*"))


def raw_device(dev: Path) -> dict:
    """Independent reading of one device directory: clock, rank, and its events deduplicated
    across the timeline files (msprof_* first), each with its lane name."""
    n = dev.name.split("_")[1]
    start = json.loads((dev / f"start_info.{n}").read_text())
    end = json.loads((dev / f"end_info.{n}").read_text())
    info = json.loads((dev / f"info.json.{n}").read_text())
    files = sorted((dev / "timeline").glob("*.json"), key=lambda p: (not p.name.startswith("msprof_"), p.name))
    seen, events = set(), []
    for f in files:
        _, evs = load_events(f)
        lanes = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
        threads = {
            (e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"
        }
        for e in evs:
            key = (e["ph"], e["name"], e["tid"], str(e.get("ts")))
            if e["ph"] == "M" or key in seen:
                continue
            seen.add(key)
            events.append({**e, "lane": lanes.get(e["pid"]), "thread": threads.get((e["pid"], e["tid"]))})
    return {
        "device": f"npu{n}",
        "rank": info["rank_id"],
        "events": events,
        "offset": int(start["collectionTimeBegin"]) * 1000 - int(start["clockMonotonicRaw"]),
        "window": (int(start["collectionTimeBegin"]) * 1000, int(end["collectionTimeEnd"]) * 1000),
    }


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    run_dir = prof_engine.import_trace([fixture_path(*PROF)], tmp_path_factory.mktemp("legacy") / "run")
    with prof_engine.open(run_dir) as run:
        yield run, {r["rank"]: r for r in map(raw_device, device_dirs())}


def test_two_devices_two_ranks(legacy):
    run, raw = legacy
    assert run.manifest["ranks"] == [0, 1] == sorted(raw)
    assert {s["format"] for s in run.manifest["sources"]} == {"msprof"}
    got = set(run.sql("SELECT rank, device FROM slices WHERE device <> 'host' GROUP BY ALL").rows())
    assert got == {(r, raw[r]["device"]) for r in raw}
    assert {s["rank"]: s["offset_ns"] for s in run.manifest["sources"]} == {r: raw[r]["offset"] for r in raw}


def test_times_are_epoch_inside_the_collection_window(legacy):
    run, raw = legacy
    for rank, r in raw.items():
        lo, hi = run.sql(f"SELECT min(ts), max(ts + dur) FROM slices WHERE rank = {rank}").rows()[0]
        assert r["window"][0] <= lo and hi <= r["window"][1], (rank, lo, hi, r["window"])


def test_every_event_once_with_its_exact_time(legacy):
    """Slices = the X events of all timeline files, each once (task_time_*/hccl_*/step_trace_* repeat
    msprof_*), the vendor's Overlap Analysis lane left out; ts exact to the ns."""
    run, raw = legacy
    for rank, r in raw.items():
        want = Counter(
            (e["name"], ns(e["ts"]) + r["offset"])
            for e in r["events"]
            if e["ph"] == "X" and e["lane"] != "Overlap Analysis"
        )
        got = Counter(tuple(row) for row in run.sql(f"SELECT name, ts FROM slices WHERE rank = {rank}").rows())
        assert got == want


def test_steps_are_the_iteration_events(legacy):
    run, raw = legacy
    for rank, r in raw.items():
        want = {
            int(e["args"]["Iteration ID"]): (ns(e["ts"]) + r["offset"], ns(e["dur"]))
            for e in r["events"]
            if e["ph"] == "X" and e.get("cat") == "Iteration Time"
        }
        rows = run.sql(f"SELECT step, ts, dur, device FROM slices WHERE rank = {rank} AND kind = 'step'").rows()
        assert {s: (ts, dur) for s, ts, dur, _ in rows} == want and len(rows) == len(want)
        assert {d for *_, d in rows} == {r["device"]}
        assert {s["step"] for s in run.manifest["steps"] if s["rank"] == rank} == set(want)
    # device work and the host call that launched the iteration (it starts before the device's
    # Iteration 1, so only the file's own slicing places it) are all in step 1
    assert run.sql("SELECT DISTINCT step FROM slices WHERE kind NOT IN ('step', 'device_range')").rows() == [(1,)]


def test_op_statistic_counts_compute_tasks(legacy):
    run, raw = legacy
    for rank, r in raw.items():
        tasks = [
            e
            for e in r["events"]
            if e["ph"] == "X" and e["lane"] == "Ascend Hardware" and (e.get("args") or {}).get("Task Type") in COMPUTE
        ]
        want = Counter(
            (re.search(r"([A-Za-z][A-Za-z0-9_]*)-op\d+$", e["name"]).group(1), e["args"]["Task Type"]) for e in tasks
        )
        rows = run.sql(f"""SELECT "OP Type", "Core Type", "Count" FROM op_statistic
                           WHERE "Rank" = {rank} AND "Device" <> 'host'""").rows()
        assert {(t, c): n for t, c, n in rows} == dict(want)
        assert sum(n for *_, n in rows) == len(tasks) == 139


def test_step_trace_matches_the_vendor_overlap_lane(legacy):
    """One step_trace row per device and step with device work; its lanes equal the sums of the
    Overlap Analysis lane msprof wrote (which prof-engine does not import, it recomputes it)."""
    run, raw = legacy
    rows = run.sql(
        'SELECT "Rank", "Device", "Step", "Computing", "Communication(Not Overlapped)", "Free" FROM step_trace'
    ).rows()
    assert {(r, d, s) for r, d, s, *_ in rows} == {(rank, r["device"], 1) for rank, r in raw.items()}
    for rank, _dev, _, computing, not_overlapped, free in rows:
        lane = Counter()
        for e in raw[rank]["events"]:
            if e["ph"] == "X" and e["lane"] == "Overlap Analysis":
                lane[e["thread"]] += Decimal(str(e["dur"]))
        assert (computing, not_overlapped, free) == pytest.approx(
            (float(lane["Computing"]), float(lane["Communication(Not Overlapped)"]), float(lane["Free"])), abs=1e-6
        )


def test_communication_op_and_plane_tasks(legacy):
    run, raw = legacy
    for rank, r in raw.items():
        ops = [e["name"] for e in r["events"] if e["ph"] == "X" and e["thread"] == "Communication Kernel"]
        planes = [
            e for e in r["events"] if e["ph"] == "X" and e["lane"] == "HCCL" and e["thread"] != "Communication Kernel"
        ]
        got = run.sql(f"SELECT name, op_type FROM slices WHERE rank = {rank} AND kind = 'comm'").rows()
        assert got == [(n, "AllReduce") for n in ops] == [("Default/AllReduce-op534_0", "AllReduce")]
        reduces = [
            e
            for e in r["events"]
            if e["ph"] == "X" and e["lane"] == "Ascend Hardware" and "REDUCE" in str(e["args"].get("Task Type", ""))
        ]  # HCCL's own device tasks
        n = run.sql(f"SELECT count(*) FROM slices WHERE rank = {rank} AND kind = 'comm_task'").rows()[0][0]
        assert n == len(planes) + len(reduces) and reduces


def test_a_device_directory_alone(tmp_path):
    dev = device_dirs()[1]
    run_dir = prof_engine.import_trace([dev], tmp_path / "run")
    with prof_engine.open(run_dir) as run:
        assert run.manifest["ranks"] == [1]
        assert run.sql("SELECT DISTINCT device FROM slices").rows() == [("npu1",)]


def test_lone_trace_view_imports_through_the_ascend_lanes(tmp_path):
    path = fixture_path(
        "ascend", "msprof_analyze_test_resources", "test", "ut", "advisor", "timeline_advice", "trace_view.json"
    )
    _, events = load_events(path)
    lanes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    hardware = [e for e in events if e.get("ph") == "X" and lanes.get(e["pid"]) == "Ascend Hardware"]
    run_dir = prof_engine.import_trace([path], tmp_path / "run")
    with prof_engine.open(run_dir) as run:
        assert run.manifest["sources"][0]["format"] == "ascend_trace"
        assert run.sql("SELECT count(*) FROM slices WHERE device = 'npu0'").rows() == [(len(hardware),)]
        assert run.sql("SELECT step FROM slices WHERE kind = 'step'").rows() == [(1,)]
        assert run.sql("SELECT count(*) FROM slices WHERE pid = '4376751100'").rows() == [(0,)]  # Overlap Analysis


def assert_one_line(proc: subprocess.CompletedProcess, expected: str, cwd: Path) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr == f"Error: {expected}\n"
    assert sorted(p.name for p in cwd.iterdir()) == []  # no run, no temporary directory left


def fail_cases() -> dict[str, tuple[tuple[str, ...], str]]:
    return {
        "mindspore_legacy": (
            ("ascend", "mindspore_legacy_4rank_pipeline_parallel"),
            "legacy MindSpore profiler summaries (step_trace_raw_<rank>_detail_time.csv, hccl_raw_<rank>.csv; "
            "ranks 0, 1, 2, 3; steps per rank {0: 5, 1: 5, 2: 5, 3: 5}) cannot be imported: their times are "
            "device syscnt ticks and the folder holds no tick frequency or clock anchor (no PROF_* device data, "
            "no profiler_info start_info) to place them in time; import the run's PROF_* directory, or profile "
            "with MindSpore >= 2.3 (ASCEND_PROFILER_OUTPUT)",
        ),
        "collection_metadata": (
            ("ascend", "msprof_ut_collection_metadata"),
            "msprof collection metadata only (end_info, host_start.log, info.json, sample.json, start_info): "
            f"device info, collection switches and clock anchors, no profiling data to import; {SUPPORTED}",
        ),
        "analyze_resources": (
            ("ascend", "msprof_analyze_test_resources"),
            "msprof-analyze outputs (test/resource/advisor/cluster_analysis_output) beside 4 loose JSON/CSV "
            "file(s), not one profiler output: derived reports are not traces; to import a trace in it, pass the "
            "file itself: test/ut/advisor/timeline_advice/trace_view.json",
        ),
        "analyze_kernel_details_only": (
            ("ascend", "msprof_analyze_test_resources", "test", "ut", "advisor", "compute_advice"),
            f"no trace in this directory, only 1 CSV file(s) (data/kernel_details.csv); {SUPPORTED}",
        ),
        "lone_legacy_timeline": (
            PROF + ("PROF_000001_20230818142704322_COJGGGCANRMICFBC", "device_0", "timeline", "msprof_0_2_1.json"),
            "timestamps are not epoch time (56635864386.8 µs: a legacy msprof timeline on the host's monotonic "
            "clock); import its PROF_* directory, whose start_info.N places it in time",
        ),
    }


@pytest.mark.parametrize("case", list(fail_cases()))
def test_unsupported_folders_fail_in_one_line(tmp_path, case):
    parts, why = fail_cases()[case]
    src = fixture_path(*parts)
    assert_one_line(cli(tmp_path, "import", src, "-o", "run"), f"{src}: {why}", tmp_path)


def test_mindspore_legacy_files_are_ticks_as_documented():
    """What the refusal rests on: step rows are syscnt tick counts (total = end − start exactly)."""
    from prof_engine.importers import mindspore_legacy

    folder = fixture_path("ascend", "mindspore_legacy_4rank_pipeline_parallel")
    assert mindspore_legacy.ranks(folder) == [0, 1, 2, 3]
    for rank in range(4):
        rows = mindspore_legacy.step_rows(folder / f"step_trace_raw_{rank}_detail_time.csv")
        assert [r["step_num"] for r in rows] == ["1", "2", "3", "4", "5"]


def test_prof_dir_without_legacy_timelines(tmp_path):
    prof = tmp_path / "src" / "PROF_000001_20240101000000000_ABCDEFGHIJKLMNOP"
    (prof / "device_0").mkdir(parents=True)
    (prof / "device_0" / "info.json.0").write_text("{}")
    (tmp_path / "out").mkdir()
    assert_one_line(
        cli(tmp_path / "out", "import", prof, "-o", "run"),
        f"{prof}: a CANN msprof PROF_* directory with neither per-device timelines "
        "(device_N/timeline/msprof_*.json) nor mindstudio_profiler_output/ (msprof_*.json, op_summary_*.csv): "
        "no profiling data to import (was it exported with --type=db only? the msprof_*.db export is not "
        "read yet)",
        tmp_path / "out",
    )


def test_device_dir_without_start_info(tmp_path):
    """Without start_info the monotonic clock cannot be placed: a clear error, not 1970 timestamps."""
    src = device_dirs()[0]
    dev = tmp_path / "src" / "device_0"
    (dev / "timeline").mkdir(parents=True)
    for f in (src / "timeline").iterdir():
        (dev / "timeline" / f.name).symlink_to(f)
    (tmp_path / "out").mkdir()
    assert_one_line(
        cli(tmp_path / "out", "import", dev, "-o", "run"),
        f"{dev}: no start_info.0: the legacy msprof timeline is on the host's CLOCK_MONOTONIC_RAW "
        "and cannot be placed in time without this clock anchor",
        tmp_path / "out",
    )


def test_iteration_trace_is_the_step_trace_lane(legacy):
    """iteration_trace per device and iteration, against the Step Trace lane's own args: Iteration
    Time(ns), FP Start, BP End, Iteration End, its `Data_aug Bound N` values (from the second
    iteration on; NULL for the first, as msprof's CSV writes N/A) and the Reduce_N_k ranges."""
    run, raw = legacy
    for rank, r in raw.items():
        trace = r["events"]
        iters = {
            int(e["args"]["Iteration ID"]): e["args"]
            for e in trace
            if e["ph"] == "X" and e.get("cat") == "Iteration Time"
        }
        bounds = {
            int(e["name"].split()[-1]): e["args"]["Data_aug Bound(us)"]
            for e in trace
            if e["ph"] == "t" and e["name"].startswith("Data_aug Bound")
        }
        reduces = Counter(
            int(m[1]) for e in trace if e["ph"] == "X" and (m := re.fullmatch(r"Reduce_(\d+)_\d+", e["name"]))
        )
        rows = run.sql(f'SELECT * FROM iteration_trace WHERE "Rank" = {rank}').arrow().to_pylist()
        assert [row["Iteration ID"] for row in rows] == sorted(iters) and len(rows) >= 10
        for row in rows:
            a = iters[row["Iteration ID"]]
            a = {k: float(v) for k, v in a.items()}
            assert row["Iteration Time(us)"] == pytest.approx(a["Iteration Time(ns)"] / 1000, abs=0.001)
            assert row["FP to BP Time(us)"] == pytest.approx(a["BP End"] - a["FP Start"], abs=0.002)
            assert row["Iteration Refresh(us)"] == pytest.approx(a["Iteration End"] - a["BP End"], abs=0.002)
            assert row["Reduce Count"] == reduces[row["Iteration ID"]] > 0
            if row["Iteration ID"] == min(iters):
                assert row["Data Aug Bound(us)"] is None
            else:
                assert row["Data Aug Bound(us)"] == pytest.approx(float(bounds[row["Iteration ID"]]), abs=0.002)


@pytest.mark.parametrize("key, value", [("DeviceInfo", 7), ("hostname", ["a", "b"]), ("hostname", {"x": 1})])
def test_a_damaged_info_json_is_not_a_traceback(tmp_path, key, value):
    """info.json.<id> is optional metadata: a `DeviceInfo` that is no list (TypeError) or a
    `hostname` that is no string (unhashable in the manifest's hosts) raised a traceback (found by
    benchmarks/fuzz.py); the device imports with its id and no host name."""
    import shutil

    src = tmp_path / "device_0"
    shutil.copytree(device_dirs()[0], src, copy_function=shutil.copyfile)
    info = src / "info.json.0"
    info.chmod(0o644)
    doc = json.loads(info.read_text(encoding="utf-8"))
    doc[key] = value
    info.write_text(json.dumps(doc), encoding="utf-8")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run", jobs=1)) as run:
        assert run.manifest["hosts"] == (["A2007104679"] if key != "hostname" else [])
        assert [d["device"] for d in run.manifest["devices"]] == ["host", "npu0"]
