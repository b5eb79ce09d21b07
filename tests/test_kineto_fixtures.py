"""Real Kineto traces (../shared/fixtures/kineto): imported, and the views checked against the raw events."""

from __future__ import annotations

import bisect
import collections
from decimal import Decimal

import pytest

import prof_engine
from conftest import fixture_path, load_events

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
FILES = {
    "sampled_2rank": ("kineto", "hta_sampled_2rank_nccl"),
    "nccl_rank0": ("kineto", "hta_nccl_parser_rank0_ws2", "nccl_data.json.gz"),
    "amd_rocm": ("kineto", "hta_amd_mi250_rocm", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
}


def _ns(us) -> int:
    """µs (int or exact Decimal from load_events) → ns."""
    return int(round(Decimal(us) * 1000))


@pytest.fixture(scope="module", params=list(FILES))
def imported(request, tmp_path_factory):
    src = fixture_path(*FILES[request.param])
    files = sorted(src.glob("*.json.gz")) if src.is_dir() else [src]
    raw = [load_events(f) for f in files]
    run_dir = prof_engine.import_trace([src], tmp_path_factory.mktemp(request.param) / "run")
    with prof_engine.open(run_dir) as run:
        yield request.param, raw, run


def _rank(top: dict, index: int) -> int:
    return (top.get("distributedInfo") or {}).get("rank", index)


def test_ranks_from_distributed_info(imported):
    _, raw, run = imported
    assert run.manifest["ranks"] == sorted(_rank(top, i) for i, (top, _) in enumerate(raw))


def _compute_kernel(e: dict) -> bool:
    """A device compute kernel: not a collective (NCCL/RCCL names or collective metadata), not a copy."""
    return (
        e.get("ph") == "X"
        and e.get("cat") == "kernel"
        and "Collective name" not in e["args"]
        and not any(k in e["name"].lower() for k in ("nccl", "rccl"))
    )


def test_device_counts_and_totals_match_raw(imported):
    """Per rank and device, op_statistic's Count and Total Time add up to the raw compute kernels."""
    _, raw, run = imported
    got = {
        (r, d): (n, t)
        for r, d, n, t in run.sql(
            """SELECT "Rank", "Device", sum("Count"), sum("Total Time(us)") FROM op_statistic
           WHERE "Device" <> 'host' GROUP BY ALL"""
        ).rows()
    }
    want: dict = collections.defaultdict(lambda: [0, 0])
    for i, (top, events) in enumerate(raw):
        for e in events:
            if _compute_kernel(e):
                dev = e["args"].get("device", e["pid"])
                w = want[(_rank(top, i), f"gpu{dev}")]
                w[0] += 1
                w[1] += _ns(e["dur"])
    assert got.keys() == want.keys()
    for key, (n, total_ns) in want.items():
        assert got[key][0] == n
        assert got[key][1] == pytest.approx(total_ns / 1000, abs=0.01)


def test_host_op_counts_match_raw(imported):
    _, raw, run = imported
    got = {
        (r, name): n
        for r, name, n in run.sql(
            """SELECT "Rank", "OP Type", "Count" FROM op_statistic WHERE "Device" = 'host'"""
        ).rows()
    }
    want = collections.Counter(
        (_rank(top, i), e["name"])
        for i, (top, events) in enumerate(raw)
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cpu_op"
    )
    assert got == dict(want)


def test_ratio_sums_to_100_per_device(imported):
    _, _, run = imported
    for rank, device, total in run.sql(
        """SELECT "Rank", "Device", sum("Ratio(%)") FROM op_statistic GROUP BY ALL"""
    ).rows():
        assert total == pytest.approx(100, abs=0.05), (rank, device)


def test_absolute_time_is_exact(imported):
    """The earliest record's start equals baseTimeNanoseconds + ts·1000 of the raw event, to the ns."""
    _, raw, run = imported
    top, events = raw[0]
    base = top.get("baseTimeNanoseconds", 0)
    ts_raw = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    ((ts,),) = run.sql("SELECT min(ts) FROM slices WHERE kind = 'host_op' AND rank = ?", [_rank(top, 0)]).rows()
    assert ts == base + _ns(ts_raw)


def test_device_work_takes_the_step_of_its_launch(imported):
    """Kernels/memcpys get the ProfilerStep that contains the runtime call with their correlation id."""
    _, raw, run = imported
    for i, (top, events) in enumerate(raw):
        steps = sorted(
            (_ns(e["ts"]), _ns(e["ts"] + e["dur"]), int(e["name"].split("#")[1]))
            for e in events
            if e.get("ph") == "X"
            and str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"
        )  # the host's steps, not their GPU copies
        starts = [s for s, _, _ in steps]

        def step_at(t: int) -> int | None:  # used within this iteration only
            k = bisect.bisect_right(starts, t) - 1  # noqa: B023
            return steps[k][2] if k >= 0 and t < steps[k][1] else None  # noqa: B023

        launch = {
            e["args"]["correlation"]: _ns(e["ts"])
            for e in events
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
        }
        want = collections.Counter(
            step_at(launch[e["args"]["correlation"]])
            for e in events
            if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS and e["args"].get("correlation") in launch
        )
        got = dict(
            run.sql(
                """SELECT step, count(*) FROM slices WHERE rank = ? AND kind IN ('kernel', 'comm', 'memcpy', 'memset')
               AND correlation IN (SELECT correlation FROM slices WHERE kind = 'api' AND rank = ?) GROUP BY step""",
                [_rank(top, i), _rank(top, i)],
            ).rows()
        )
        assert got == dict(want)


def test_collective_metadata(imported):
    name, raw, run = imported
    want = sum(
        1 for top, events in raw for e in events if e.get("ph") == "X" and "Collective name" in (e.get("args") or {})
    )
    ((got, with_bytes),) = run.sql("SELECT count(*), count(bytes) FROM comm").rows()
    assert got == want
    if name == "nccl_rank0":
        assert got > 0 and with_bytes == got
        ((nel, nbytes, dtype),) = run.sql("SELECT in_nelems, bytes, dtype FROM comm LIMIT 1").rows()
        assert dtype == "Float" and nbytes == nel * 4


def test_steps_cover_the_trace(imported):
    _, raw, run = imported
    want = sorted(
        {
            (_rank(top, i), int(e["name"].split("#")[1]))
            for i, (top, events) in enumerate(raw)
            for e in events
            if str(e.get("name", "")).startswith("ProfilerStep#")
        }
    )
    assert [(s["rank"], s["step"]) for s in run.manifest["steps"]] == want
    # step_trace has a row for each step of each device that worked in it (a host-only step has none)
    worked = set(
        run.sql("SELECT DISTINCT rank, device, step FROM slices WHERE device <> 'host' AND step IS NOT NULL").rows()
    )
    assert (
        worked
        and set(run.sql('SELECT "Rank", "Device", "Step" FROM step_trace WHERE "Step" IS NOT NULL').rows()) == worked
    )


# torch's async ranges: the record_function of a c10d Work (torch marks it async: out of the tree)
C10D_WORK_RANGE = ("nccl:", "gloo:")
# host categories of torch's tree, in lower case (Kineto capitalised them until 2021: `Operator`, `Runtime`)
HOST_TREE_CATS = {"cpu_op", "operator", "user_annotation", "cuda_runtime", "cuda_driver", "runtime"}


def torch_key_averages(events: list[dict]) -> dict[str, tuple[int, float, float]]:
    """torch.profiler's key_averages (name -> calls, self µs, total µs) of a trace's host events,
    by torch's own code: FunctionEvents of the raw events (c10d Work ranges async, as torch
    records them), `EventList._populate_cpu_children` and `_remove_dup_nodes` (the redispatch
    fold). ProfilerStep#N are steps here (step_trace's rows), not rows."""
    profiler_util = pytest.importorskip("torch.autograd.profiler_util")
    host = [e for e in events if e.get("ph") == "X" and (e.get("cat") or "").lower() in HOST_TREE_CATS]
    evs = profiler_util.EventList(
        [
            profiler_util.FunctionEvent(
                id=i,
                name=e["name"],
                thread=(e["pid"], e["tid"]),
                start_us=_ns(e["ts"]),
                end_us=_ns(e["ts"]) + _ns(e["dur"]),
                is_async=e["name"].startswith(C10D_WORK_RANGE),
            )
            for i, e in enumerate(host)
        ]
    )
    evs._populate_cpu_children()
    evs._remove_dup_nodes()
    out: dict[str, list] = collections.defaultdict(lambda: [0, 0, 0])
    for e in evs:
        if not e.name.startswith("ProfilerStep#"):
            row = out[e.name]
            row[0] += 1
            row[1] += e.self_cpu_time_total / 1000
            row[2] += e.cpu_time_total / 1000
    return {k: tuple(v) for k, v in out.items()}


def _key_averages(run, rank: int) -> dict[str, tuple]:
    return {
        n: (c, s, t)
        for n, c, s, t in run.sql(
            'SELECT "Name", "Calls", "Self Host(us)", "Host Total(us)" FROM key_averages WHERE "Rank" = ?', [rank]
        ).rows()
    }


def assert_torchs_key_averages(ours: dict[str, tuple], want: dict[str, tuple], rank: int) -> None:
    assert sorted(ours) == sorted(want), rank
    for name, (calls, self_us, total_us) in want.items():
        assert ours[name] == (calls, pytest.approx(self_us, abs=0.01), pytest.approx(total_us, abs=0.01)), (rank, name)


@pytest.mark.parametrize(
    "parts",
    [
        ("kineto", "kineto_v100_resnet50_2021", "worker0.1623143089861.pt.trace.json.gz"),
        ("kineto", "rccl_mi300x_resnet_3step", "resnet_act_checkpoint.json.gz"),
    ],
)
def test_key_averages_of_other_kineto_versions_is_torchs_tree(parts, tmp_path):
    """As below, on a Kineto trace of 2021 (capitalised categories) and a ROCm one with Python frames."""
    src = fixture_path(*parts)
    top, events = load_events(src)
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        assert_torchs_key_averages(_key_averages(run, _rank(top, 0)), torch_key_averages(events), _rank(top, 0))


def test_key_averages_is_torchs_tree_of_the_raw_events(imported):
    """key_averages' calls, self and total host time per op, range and runtime call are torch's
    own tree over the raw events: the c10d ranges (`nccl:all_reduce`...) are rows without self
    time that their op (record_param_comms) keeps as self time, as torch's key_averages has them
    (on rank 1 of the sampled job, record_param_comms' self time is 1,557 µs: the 225 µs of a
    tree that nested the ranges is not torch's, which marks them async)."""
    param, raw, run = imported
    for i, (top, events) in enumerate(raw):
        rank = _rank(top, i)
        want = torch_key_averages(events)
        assert_torchs_key_averages(_key_averages(run, rank), want, rank)
        if param == "sampled_2rank" and rank == 1:
            assert want["record_param_comms"][1] == 1557 and want["nccl:all_to_all"] == (4, 0, 1075)
