"""The advice views: each rule fires on a synthetic trace built to show its problem, with the
numbers the trace holds, and none fires on a trace without one. `advice_by_rank` holds each
device's finding; `advice` one row per finding over its ranks (on one device: the same finding)."""

from __future__ import annotations

import pytest

import prof_engine
from conftest import write_trace, x


def _kernel(name: str, ts: float, dur: float, correlation: int, cat: str = "kernel") -> dict:
    return x(name, ts, dur, cat=cat, pid=0, tid=7, device=0, stream=7, correlation=correlation)


def _launch(ts: float, dur: float, correlation: int) -> dict:
    return x("cudaLaunchKernel", ts, dur, cat="cuda_runtime", correlation=correlation)


def _advice(tmp_path, events, name="t") -> dict[str, tuple]:
    run = prof_engine.import_trace([write_trace(tmp_path / f"{name}.json", events)], tmp_path / f"{name}_run")
    with prof_engine.open(run) as r:
        by_rank = {
            rule: rest
            for rule, *rest in r.sql(
                'SELECT "Rule", "Rank", "Device", "Severity", "Finding", "Share(%)" FROM advice_by_rank'
            ).rows()
        }
        grouped = r.sql('SELECT "Rule", "Ranks", "Devices", "Severity", "Finding", "Share(%)" FROM advice').rows()
    # one rank, one device: advice's row of each finding is the device's own
    assert sorted(grouped) == sorted((rule, str(k), 1, *rest) for rule, (k, _, *rest) in by_rank.items())
    return by_rank


def test_a_busy_device_gets_no_advice(tmp_path):
    events, c = [], 0
    for step, start in ((1, 0.0), (2, 1000.0)):
        events.append(x(f"ProfilerStep#{step}", start, 1000, cat="user_annotation"))
        for i in range(10):  # 10 kernels of 95 µs back to back, each launched 3 µs ahead
            c += 1
            events += [_launch(start + 2 + 95 * i, 3, c), _kernel("gemm", start + 5 + 95 * i, 95, c)]
    # one small copy from pageable memory: 0.1 % of the steps, below the rule's 1 %
    events.append(_kernel("Memcpy HtoD (Pageable -> Device)", 960, 2, 999, cat="gpu_memcpy"))
    assert _advice(tmp_path, events) == {}


def _every_rule() -> list[dict]:
    """One step in which each rule's cause holds its own time (µs; ASCII timeline of the device):

    host   |DataLoader 0-400|        launches ...          |sync 2760-3100|  launch 3200
    device |   (idle, 800: before the first work)  |120 × 2 µs, 10 µs apart|nccl 400|copy 100|idle 460|gemm 100
           0                                       800                  2230 2240  2640 2650 2750 3210 3310
    """
    events = [
        x("ProfilerStep#1", 0, 4000, cat="user_annotation"),
        x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 400, cat="user_annotation"),
    ]
    for i in range(120):  # each launched by a 5 µs call just in time: launch-bound, gaps of 10 µs
        events += [_launch(790 + 12 * i, 5, i + 1), _kernel("tiny", 800 + 12 * i, 2, i + 1)]
    return events + [
        _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 2240, 400, 500),  # hidden by nothing
        _kernel("Memcpy HtoD (Pageable -> Device)", 2650, 100, 501, cat="gpu_memcpy"),  # neither lane: idle
        x("cudaDeviceSynchronize", 2760, 340, cat="cuda_runtime"),  # ends in the stream's gap 2750-3210
        _launch(3200, 5, 502),
        _kernel("gemm", 3210, 100, 502),  # launched after the gap began: the host's
    ]


def test_each_rule_fires_with_its_numbers(tmp_path):
    advice = _advice(tmp_path, _every_rule())
    assert set(advice) == {
        "device_idle",
        "exposed_communication",
        "slow_step_start",
        "slow_dataloader",
        "launch_bound",
        "pageable_copies",
        "host_sync",
    }
    assert {rule: tuple(row[:2]) for rule, row in advice.items()} == dict.fromkeys(advice, (0, "gpu0"))
    # the steps' time: 800 µs before the first work and the span 800-3310; computing 340, and
    # each rule's part of the rest: the sync's gap, the copy, the DataLoader's wait, the rest of
    # the wait before the first work and the rest of the idle
    total = 800 + 2510
    parts = {
        "exposed_communication": 400,
        "host_sync": 460,
        "pageable_copies": 100,
        "slow_dataloader": 400,
        "slow_step_start": 400,
        "device_idle": 1770 - 460 - 100,
    }
    assert {rule: advice[rule][4] for rule in parts} == {rule: round(100 * t / total, 1) for rule, t in parts.items()}
    assert sum(parts.values()) + 340 == total  # every instant once: the shares and computing's make 100 %
    assert {rule: row[2] for rule, row in advice.items()} == {
        **dict.fromkeys(parts, "medium"),
        "device_idle": "high",
        "launch_bound": "high",
    }
    assert advice["device_idle"][3] == (
        "the device was idle 36.6 % of its 1 step(s) (1,210 of 3,310 µs; another 560 µs of idle went to host_sync, "
        "pageable_copies or slow_dataloader); of the gaps on its busiest stream (7): 28 % host wait, 72 % kernel wait, "
        "0 % other"
    )
    assert advice["host_sync"][3] == (
        "the device sat idle 460 µs (13.9 % of its 1 step(s)) after the host's synchronizations, until the host "
        "launched again; the host waited 340 µs in 1 calls (cudaDeviceSynchronize)"
    )
    assert advice["pageable_copies"][3] == (
        "1 copies to or from pageable host memory took 100 µs; the device did "
        "nothing else for 100 µs of it (3.0 % of its 1 step(s))"
    )
    assert advice["slow_dataloader"][3] == (
        "waiting for the DataLoader left the device idle 12.1 % of its 1 step(s) "
        "(400 µs; the host waited 400 µs for 1 batches)"
    )
    assert advice["slow_step_start"][3] == (
        "each step's first device work started 800 µs after the step began on the "
        "host (mean over 1 step(s)); the device idled for it 12.1 % of the steps' "
        "time (400 µs)"
    )
    assert tuple(advice["launch_bound"][3:]) == (
        "120 of 121 device tasks (99 %) ran shorter than the runtime call that launched them",
        None,
    )


def test_a_host_blocked_while_the_device_works_is_no_host_sync(tmp_path):
    """Each step launches ten 95 µs kernels at once, then synchronizes until the device is done:
    the host waits ~95 % of the time, the device is busy 97 % of it. The wait cost only the
    25 µs before the next step's first kernel (1.3 %), under host_sync's 5 %."""
    events, c = [], 0
    for start in (0, 1000):
        events.append(x(f"ProfilerStep#{start // 1000 + 1}", start, 1000, cat="user_annotation"))
        for i in range(10):
            c += 1
            events += [_launch(start + 1 + 2 * i, 1, c), _kernel("gemm", start + 25 + 95 * i, 95, c)]
        events.append(x("cudaDeviceSynchronize", start + 30, 948, cat="cuda_runtime"))
    assert _advice(tmp_path, events) == {}


@pytest.mark.parametrize("late_host", [True, False])
def test_device_idle_names_the_cause_of_its_gaps(tmp_path, late_host):
    """Ten 20 µs kernels 70 µs apart: launched each after the previous one ended, the gaps are
    the host's; all launched ahead, the stream waited on something else."""
    events = [x("ProfilerStep#1", 0, 2000, cat="user_annotation")]
    for i in range(10):
        start = 100 + 90 * i
        events += [_launch(start - 40 if late_host else 10 + i, 3, i + 1), _kernel("gemm", start, 20, i + 1)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        ((finding, suggestion),) = r.sql(
            """SELECT "Finding", "Suggestion" FROM advice WHERE "Rule" = 'device_idle'"""
        ).rows()
    assert finding.endswith(
        "of the gaps on its busiest stream (7): 100 % host wait, 0 % kernel wait, 0 % other"
        if late_host
        else "of the gaps on its busiest stream (7): 0 % host wait, 0 % kernel wait, 100 % other"
    )
    assert suggestion.startswith("the host launches too late" if late_host else "the streams wait on work other than")


@pytest.mark.parametrize(
    ("launch", "kernel", "remedy"),
    [
        ("cudaLaunchKernel", "gemm", "fewer, larger kernels (torch.compile, CUDA graphs) or a larger batch"),
        (
            "cudaLaunchKernel",
            "triton_poi_fused_add_0",
            'fewer launches (CUDA graphs: torch.compile\'s mode="reduce-overhead") '
            "or a larger batch; the run already runs compiled (Triton) kernels",
        ),
        (
            "cudaGraphLaunch",
            "gemm",
            "fewer, larger kernels (torch.compile) or a larger batch; the run already replays CUDA "
            "graphs: capture more of the step",
        ),
    ],
)
def test_the_remedy_for_launch_overhead_is_one_the_run_does_not_use(tmp_path, launch, kernel, remedy):
    """A late host is told to launch less; not to use torch.compile or CUDA graphs where its kernels
    are Inductor's or its launches replay graphs already."""
    events = [x("ProfilerStep#1", 0, 2000, cat="user_annotation")]
    for i in range(10):
        start = 100 + 90 * i
        events += [x(launch, start - 40, 3, cat="cuda_runtime", correlation=i + 1), _kernel(kernel, start, 20, i + 1)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        ((suggestion,),) = r.sql("""SELECT "Suggestion" FROM advice WHERE "Rule" = 'device_idle'""").rows()
    assert suggestion.startswith("the host launches too late") and suggestion.endswith(remedy)


@pytest.mark.parametrize("launch", ["cudaLaunchKernel", "cudaGraphLaunch"])
def test_a_graphs_tasks_are_not_launch_bound(tmp_path, launch):
    """120 kernels of 2 µs, each behind a 5 µs launch call, are launch-bound; the same kernels
    replayed as 12 CUDA graphs of 10 (one 5 µs call each) were not launched one by one."""
    events = [x("ProfilerStep#1", 0, 5000, cat="user_annotation")]
    for i in range(120):
        corr = i + 1 if launch == "cudaLaunchKernel" else i // 10 + 1
        if launch == "cudaLaunchKernel" or i % 10 == 0:
            events.append(x(launch, 10 + 30 * i, 5, cat="cuda_runtime", correlation=corr))
        events.append(_kernel("k", 20 + 30 * i, 2, corr))
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        rules = {rule for (rule,) in r.sql('SELECT "Rule" FROM advice').rows()}
    assert ("launch_bound" in rules) == (launch == "cudaLaunchKernel")


def test_slow_rank_is_advice(tmp_path):
    src = tmp_path / "job"
    src.mkdir()
    for rank in range(3):
        work = 900 if rank == 2 else 300  # rank 2 computes three times as long
        events = [
            x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            _launch(1, 2, 1),
            _kernel("gemm", 5, work, 1),
            _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 910, 50, 2),
        ]
        write_trace(src / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 3})
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as r:
        rows = r.sql("""SELECT "Rank", "Severity", "Finding" FROM advice_by_rank WHERE "Rule" = 'slow_rank'""").rows()
        (threshold,) = r.sql('SELECT DISTINCT "Threshold(us)" FROM slow_rank').rows()[0]
    # each rank's step: 5-960 µs, Computing + Communication(Not Overlapped) + Free; 5 % of it the threshold
    assert threshold == pytest.approx(0.05 * 955)
    assert rows == [
        (
            2,
            "medium",
            "slower than the other ranks of its group (ranks 0-2) in 1 step(s): Computing above "
            "(up to 600 µs from the median; threshold 5 % of the mean step, 48 µs)",
        )
    ]


def test_time_two_rules_could_claim_goes_to_the_first(tmp_path):
    """The host syncs while the device communicates on another stream: the compute stream's gap
    (110-710 µs, the host's: it launched after the gap began) is exposed communication until the
    all-reduce ends (600), and host_sync's only after it.

        stream 7 |A 10-110|        gap          |B 710-810|
        stream 8          |nccl 110-600|
        host       sync 120-500 ... launch B at 700
    """
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _launch(5, 2, 1),
        _kernel("gemm", 10, 100, 1),
        x(
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            110,
            490,
            cat="kernel",
            pid=0,
            tid=8,
            device=0,
            stream=8,
            correlation=9,
        ),
        x("cudaDeviceSynchronize", 120, 380, cat="cuda_runtime"),
        _launch(700, 2, 2),
        _kernel("gemm", 710, 100, 2),
    ]
    advice = _advice(tmp_path, events)
    total = 10 + 800  # before the first kernel, and the span
    assert {rule: row[4] for rule, row in advice.items()} == {
        "exposed_communication": round(100 * 490 / total, 1),
        "host_sync": round(100 * 110 / total, 1),
    }


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in _union(intervals))


def _less(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|∪a − ∪b|: the length of a's union that b's does not cover."""
    return _length(a + b) - _length(b)


def test_a_cpu_only_gloo_job_gets_exposed_communication(gloo_2rank_run):
    """A 2-rank gloo job on CPUs: its all_reduces, which no CPU op overlaps, are a finding on each
    rank's host, with the share that the raw slices give: the union of the gloo ranges less the
    union of the CPU ops, over the steps' time (each step from its start to its last op)."""
    _, run = gloo_2rank_run
    rows = run.sql(
        """SELECT "Rank", "Device", "Share(%)" FROM advice_by_rank WHERE "Rule" = 'exposed_communication'"""
    ).rows()
    assert sorted(r[:2] for r in rows) == [(0, "host"), (1, "host")]
    for rank, _, share in rows:
        slices = run.sql(
            "SELECT kind, step, ts, ts + dur FROM slices WHERE rank = ? AND device = 'host' "
            "AND kind IN ('step', 'host_op', 'comm')",
            [rank],
        ).rows()
        steps = {step: s for kind, step, s, _ in slices if kind == "step"}
        comm = [(s, e) for kind, step, s, e in slices if kind == "comm" and step in steps]
        ops = [(s, e) for kind, step, s, e in slices if kind == "host_op" and step in steps]
        windows = [
            (start, max(e for kind, step, _, e in slices if step == k and kind != "step")) for k, start in steps.items()
        ]
        oracle = 100 * _less(comm, ops) / _length(windows)
        # the share moves with the machine's load (19-25 % seen); 10 % is the rule's threshold
        assert share == pytest.approx(oracle, abs=0.06) and share >= 10, (rank, share, oracle)


def test_torch_npu_shares_never_count_a_moment_twice(torch_npu_text_run):
    """torch_npu level1: the host waits in aclrtSynchronizeStreamWithTimeout while the device
    communicates. That time is exposed communication; it is not also host_sync: a device's shares,
    and a rank's, add up to 100 % at most."""
    _, run = torch_npu_text_run
    by_device = run.sql(
        'SELECT "Rank", "Device", sum("Share(%)"), list("Rule" ORDER BY "Rule") FROM advice_by_rank '
        'WHERE "Share(%)" IS NOT NULL GROUP BY ALL ORDER BY ALL'
    ).rows()
    assert [r[:2] for r in by_device] == [(0, "npu0"), (1, "npu1")]  # one device a rank: no host findings apart
    for rank, device, total, rules in by_device:
        assert total <= 100, (rank, device, total, rules)
        assert "exposed_communication" in rules and "host_sync" not in rules


def test_every_finding_names_a_query_that_shows_its_numbers(tmp_path):
    src = tmp_path / "job"
    src.mkdir()
    for rank in range(3):  # every rule of _every_rule's, and rank 2 slow (slow_rank)
        events = _every_rule() + ([_launch(3320, 2, 900), _kernel("gemm", 3330, 900, 900)] if rank == 2 else [])
        write_trace(src / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 3})
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as r:
        rows = r.sql('SELECT "Rank", "Rule", "Views", "Query" FROM advice_by_rank').rows()
        grouped = r.sql('SELECT "Ranks", "Rule", "Views", "Query" FROM advice').rows()
        assert (
            {rule for _, rule, _, _ in rows}
            == {rule for _, rule, _, _ in grouped}
            == {
                "device_idle",
                "exposed_communication",
                "slow_step_start",
                "slow_dataloader",
                "launch_bound",
                "pageable_copies",
                "host_sync",
                "slow_rank",
            }
        )
        for ranks, rule, views, query in rows + grouped:
            assert query.split(" FROM ")[1].split()[0] in views.split(", "), (rule, query)
            shown = r.sql(query).rows()
            assert shown, (rule, query)
            # each query shows the rows of its finding's ranks (rank first), of those alone
            fired = {ranks} if isinstance(ranks, int) else {k for k, f, _, _ in rows if f == rule}
            assert {row[0] for row in shown} == fired, (ranks, rule)
        fired_on = {rule: sorted(k for k, f, _, _ in rows if f == rule) for _, rule, _, _ in grouped}
        assert fired_on["slow_rank"] == [2] and fired_on["device_idle"] == [0, 1, 2]
        compact = {(0, 1, 2): "0-2", (0, 1): "0-1", (2,): "2", (0,): "0", (1,): "1"}
        assert {rule: ranks for ranks, rule, _, _ in grouped} == {
            rule: compact[tuple(k)] for rule, k in fired_on.items()
        }
        (query,) = [q for rank, rule, _, q in rows if (rank, rule) == (1, "pageable_copies")]
        assert r.sql(query).rows()[0][:3] == (1, "gpu0", "Memcpy HtoD (Pageable -> Device)")


def test_no_findings_is_said_with_what_was_checked(tmp_path):
    from typer.testing import CliRunner

    from prof_engine.cli import app

    events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation")]
    for i in range(10):  # 10 kernels of 95 µs back to back, each launched 3 µs ahead
        events += [_launch(2 + 95 * i, 3, i + 1), _kernel("gemm", 5 + 95 * i, 95, i + 1)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    said = (
        "advice: no findings; checked exposed_communication, host_sync, pageable_copies, slow_dataloader, "
        "slow_step_start, device_idle, launch_bound over 1 step(s) of 1 rank(s)"
    )
    with prof_engine.open(run) as r:
        assert r.sql("SELECT count(*) FROM advice").rows() == [(0,)]
        assert r.summary()["Advice (advice: what to look at first)"].rows() == [(None, None, said, None)]
        page = r.report(tmp_path / "report.html").read_text(encoding="utf-8")
    assert said in page
    shown = CliRunner().invoke(app, ["show", str(run)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0 and said in shown.output, shown.output
