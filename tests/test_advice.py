"""The advice view: each rule fires on a synthetic trace built to show its problem, with the
numbers the trace holds, and none fires on a trace without one."""

from __future__ import annotations

import pytest
from conftest import write_trace, x

import prof_engine


def _kernel(name: str, ts: float, dur: float, correlation: int, cat: str = "kernel") -> dict:
    return x(name, ts, dur, cat=cat, pid=0, tid=7, device=0, stream=7, correlation=correlation)


def _launch(ts: float, dur: float, correlation: int) -> dict:
    return x("cudaLaunchKernel", ts, dur, cat="cuda_runtime", correlation=correlation)


def _advice(tmp_path, events, name="t") -> dict[str, tuple]:
    run = prof_engine.import_trace([write_trace(tmp_path / f"{name}.json", events)], tmp_path / f"{name}_run")
    with prof_engine.open(run) as r:
        return {rule: rest for rule, *rest in r.sql(
            'SELECT "Rule", "Rank", "Device", "Severity", "Finding", "Share(%)" FROM advice').rows()}


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


def test_each_rule_fires_with_its_numbers(tmp_path):
    events = [x("ProfilerStep#1", 0, 3000, cat="user_annotation")]
    for i in range(120):  # 120 kernels of 2 µs, each launched by a 5 µs call: 240 µs busy, 500-1930
        events += [_launch(490 + 12 * i, 5, i + 1), _kernel("tiny", 500 + 12 * i, 2, i + 1)]
    events += [
        _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 1940, 400, 500),  # hidden by nothing
        _kernel("Memcpy HtoD (Pageable -> Device)", 2350, 20, 501, cat="gpu_memcpy"),  # neither lane: free
        x("cudaDeviceSynchronize", 2400, 300, cat="cuda_runtime"),
        x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 10, 600, cat="user_annotation"),
    ]
    advice = _advice(tmp_path, events)
    assert set(advice) == {"device_idle", "exposed_communication", "slow_step_start", "slow_dataloader", "launch_bound",
                           "pageable_copies", "host_sync"}
    # the device's step (step_trace): from its first computing or communication (500 µs) to the
    # end of the last (2340 µs); copies are neither
    span, busy = 1840, 240 + 400
    rank, device, severity, finding, share = advice["device_idle"]
    assert (rank, device, severity) == (0, "gpu0", "high") and share == pytest.approx(100 * (span - busy) / span, abs=0.1)
    # its gaps are the 10 µs between back-to-back kernels launched in time: launch overhead
    assert finding == ("the device was idle 65.2 % of its 1 step(s) (1,200 of 1,840 µs); of the gaps on its busiest "
                       "stream (7): 0 % host wait, 100 % kernel wait, 0 % other")
    assert advice["exposed_communication"][4] == pytest.approx(100 * 400 / span, abs=0.1)
    assert "started 500 µs after" in advice["slow_step_start"][3]
    assert tuple(advice["launch_bound"][2:4]) == ("high", ("120 of 120 device tasks (100 %) ran shorter than the "
                                                           "runtime call that launched them"))
    assert advice["pageable_copies"][3].startswith("1 copies to or from pageable host memory took 20 µs")
    assert advice["host_sync"][1] == "host" and "300 µs in 1 device synchronizations (cudaDeviceSynchronize)" in \
        advice["host_sync"][3] and advice["host_sync"][4] == pytest.approx(100 * 300 / span, abs=0.1)
    # the host's step is 3000 µs, 600 of them waiting for the next batch
    assert tuple(advice["slow_dataloader"][1:5]) == (
        "host", "medium", "waiting for the DataLoader took 20.0 % of the host's steps (1 batches, 600 µs)", 20.0)


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
        ((finding, suggestion),) = r.sql("""SELECT "Finding", "Suggestion" FROM advice WHERE "Rule" = 'device_idle'""").rows()
    assert finding.endswith("of the gaps on its busiest stream (7): 100 % host wait, 0 % kernel wait, 0 % other"
                            if late_host else "of the gaps on its busiest stream (7): 0 % host wait, 0 % kernel wait, 100 % other")
    assert suggestion.startswith("the host launches too late" if late_host else "the streams wait on work other than")


@pytest.mark.parametrize(("launch", "kernel", "remedy"), [
    ("cudaLaunchKernel", "gemm", "fewer, larger kernels (torch.compile, CUDA graphs) or a larger batch"),
    ("cudaLaunchKernel", "triton_poi_fused_add_0", 'fewer launches (CUDA graphs: torch.compile\'s mode="reduce-overhead") '
                                                   "or a larger batch; the run already runs compiled (Triton) kernels"),
    ("cudaGraphLaunch", "gemm", "fewer, larger kernels (torch.compile) or a larger batch; the run already replays CUDA "
                                "graphs: capture more of the step"),
])
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
        events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation"), _launch(1, 2, 1), _kernel("gemm", 5, work, 1),
                  _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 910, 50, 2)]
        write_trace(src / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 3})
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as r:
        rows = r.sql("""SELECT "Rank", "Severity", "Finding" FROM advice WHERE "Rule" = 'slow_rank'""").rows()
    assert rows == [(2, "medium", "slower than the other ranks in 1 step(s): Computing (up to 600 µs over the median)")]
