"""Every Kineto schema version classifies: the capitalised categories of 2021 (`Operator`,
`Runtime`, `Kernel`, `Memcpy`, `Memset`, `external id`, `async` flows) as well as today's, checked
against a few lines of Python over the raw JSON; categories no version wrote are a finding."""

from __future__ import annotations

import collections

import pytest

import prof_engine
from conftest import fixture_path, load_events, write_trace, x
from prof_engine.importers import scan

DEVICE_2021 = {"Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}


@pytest.fixture(scope="module")
def v2021(tmp_path_factory):
    """(raw events, open run) of the torch-tb-profiler sample of June 2021 (ResNet-50 on a V100)."""
    src = fixture_path("kineto", "kineto_v100_resnet50_2021")
    (path,) = sorted(src.glob("*.json.gz"))
    _, events = load_events(path)
    with prof_engine.open(prof_engine.import_trace([src], tmp_path_factory.mktemp("v2021") / "run")) as run:
        yield events, run


def test_2021_kernels_are_device_kernels(v2021):
    """kernel_statistic counts every `Kernel` event, on the GPU its pid names, with its total time."""
    events, run = v2021
    want: dict = collections.defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "Kernel":
            w = want[(f"gpu{e['pid']}", e["name"])]
            w[0] += 1
            w[1] += e["dur"]  # integer µs in this version
    got = {
        (d, name): [n, t]
        for d, name, n, t in run.sql(
            'SELECT "Device", "Name", "Instances", "Total Time(us)" FROM kernel_statistic'
        ).rows()
    }
    assert got and got == {k: [n, float(t)] for k, (n, t) in want.items()}
    kinds = dict(run.sql("SELECT category, kind FROM slices WHERE device <> 'host' GROUP BY ALL").rows())
    assert kinds == DEVICE_2021


def test_2021_host_ops_are_op_statistic(v2021):
    """op_statistic's host rows count every `Operator` event but the ProfilerStep ranges, by name."""
    events, run = v2021
    want = collections.Counter(
        e["name"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "Operator" and not e["name"].startswith("ProfilerStep#")
    )
    got = dict(run.sql("""SELECT "OP Type", "Count" FROM op_statistic WHERE "Device" = 'host'""").rows())
    assert got and got == dict(want)
    assert run.sql("SELECT count(*) FROM slices WHERE kind = 'api'").rows() == [
        (sum(1 for e in events if e.get("cat") == "Runtime"),)
    ]
    assert [s["step"] for s in run.manifest["steps"]] == sorted(
        int(e["name"].split("#")[1])
        for e in events
        if e.get("cat") == "Operator" and e["name"].startswith("ProfilerStep#")
    )


def test_2021_device_records_link_to_their_launching_op(v2021):
    """Each device record whose `correlation` a `Runtime` call carries is linked, to the `Operator`
    whose `External id` its `external id` names (the op that encloses that call)."""
    events, run = v2021
    runtime = {e["args"]["correlation"] for e in events if e.get("cat") == "Runtime"}
    op_name = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "Operator"}
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_2021]
    want = collections.Counter(
        (e["args"]["correlation"], op_name.get(e["args"]["external id"]))
        for e in device
        if e["args"]["correlation"] in runtime
    )
    assert len(want) == len(device)  # every one has its launch in this trace
    got = collections.Counter(
        run.sql("SELECT correlation, launch_name FROM slices WHERE device <> 'host' AND launch_id IS NOT NULL").rows()
    )
    assert got == want


def test_2021_trace_has_no_unknown_categories(v2021):
    _, run = v2021
    findings = [f for s in run.manifest["sources"] for f in (s.get("info") or {}).get("findings", [])]
    assert not [f for f in findings if f["rule"] == "unknown_categories"]
    assert run.sql("SELECT count(*) FROM slices WHERE kind = 'other'").rows() == [(0,)]


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_category_case_and_unknown_categories(tmp_path, monkeypatch, native):
    """Categories match in any case; slices of a category no Kineto version wrote are kind 'other'
    and named in an `unknown_categories` finding (not those of a known category, nor those with none)."""
    if not native:
        monkeypatch.setattr(scan, "available", lambda: False)
    events = [
        x("ProfilerStep#1", 0, 100, cat="USER_ANNOTATION"),
        x("aten::mm", 1, 10, cat="CPU_Op"),
        x("cudaLaunchKernel", 2, 1, cat="Cuda_Runtime", correlation=5),
        x("gemm", 20, 5, cat="KERNEL", pid=3, tid=7, stream=7, correlation=5),
        x("mystery", 30, 1, cat="my_plugin"),
        x("mystery", 31, 1, cat="my_plugin"),
        x("odd", 32, 1, cat="Odd"),
        x("instant-ish", 33, 1, cat="cpu_instant_event"),
        x("bare", 34, 1, cat=""),
        x("window", 0, 200, cat="TRACE"),
    ]
    trace = write_trace(tmp_path / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        kinds = dict(run.sql("SELECT name, kind || '@' || device FROM slices").rows())
        (info,) = [s.get("info") or {} for s in run.manifest["sources"]]
    assert kinds == {
        "ProfilerStep#1": "step@host",
        "aten::mm": "host_op@host",
        "cudaLaunchKernel": "api@host",
        "gemm": "kernel@gpu3",
        "mystery": "other@host",
        "odd": "other@host",
        "instant-ish": "other@host",
        "bare": "other@host",
    }
    (finding,) = [f for f in info.get("findings", []) if f["rule"] == "unknown_categories"]
    assert finding["count"] == 3 and "'my_plugin' (2)" in finding["detail"] and "'Odd' (1)" in finding["detail"]
