"""Issue 38 item 13: advice over several ranks is one row per finding — the ranks it holds on
("0-3,6") and the min/median/max over them of its number — not the same sentence once per rank;
`advice_by_rank` keeps each rank's own row.

An 8-rank job built so that each rank's shares are known by construction (the oracle: the
intervals the test writes, in plain Python):

    gpu0 stream 7 |gemm 5-105|   idle_r   |gemm 100 µs|
         stream 8                                     |allreduce 150 µs|   (ranks 0-3 and 6 only)

Each step starts at 0 on the host, so a rank's steps' time is its span's end; its device is idle
idle_r µs (device_idle) and its all-reduce runs with no computing beside it (exposed_communication).
"""

from __future__ import annotations

import statistics

import pytest

import prof_engine
from conftest import write_trace, x

IDLE = [300, 310, 290, 320, 305, 295, 315, 285]  # µs, by rank: within 5 % of the step, no rank slow
COMM_RANKS = (0, 1, 2, 3, 6)
COMM = 150


def _kernel(name: str, ts: float, dur: float, correlation: int, stream: int = 7) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, correlation=correlation)


def _rank(rank: int) -> list[dict]:
    idle = IDLE[rank]
    events = [
        x("ProfilerStep#1", 0, 2000, cat="user_annotation"),
        x("cudaLaunchKernel", 1, 2, cat="cuda_runtime", correlation=1),
        _kernel("gemm", 5, 100, 1),
        x("cudaLaunchKernel", 3, 2, cat="cuda_runtime", correlation=2),
        _kernel("gemm", 105 + idle, 100, 2),
    ]
    if rank in COMM_RANKS:
        events += [
            x("cudaLaunchKernel", 4, 2, cat="cuda_runtime", correlation=3),
            _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 205 + idle, COMM, 3, stream=8),
        ]
    return events


def _total(rank: int) -> float:
    """The rank's steps' time: from the host's step start (0) to its span's last end, µs."""
    return 205 + IDLE[rank] + (COMM if rank in COMM_RANKS else 0)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("eight")
    for rank in range(8):
        write_trace(d / f"rank{rank}.json", _rank(rank), distributedInfo={"rank": rank, "world_size": 8})
    with prof_engine.open(prof_engine.import_trace([d], d / "run", jobs=1)) as r:
        yield r


def _expected(shares: dict[int, float]) -> tuple[float, float, float]:
    return min(shares.values()), statistics.median(shares.values()), max(shares.values())


def test_one_row_per_finding_with_its_ranks_and_range(run):
    rows = run.sql('SELECT "Rule", "Ranks", "Devices", "Min", "Median", "Max", "Unit", "Finding" FROM advice').rows()
    by_rule = {r[0]: r[1:] for r in rows}
    assert len(rows) == len(by_rule)  # one row per finding, not one per rank
    idle = {k: 100 * IDLE[k] / _total(k) for k in range(8)}
    comm = {k: 100 * COMM / _total(k) for k in COMM_RANKS}
    assert set(by_rule) == {"device_idle", "exposed_communication"}
    for rule, shares, ranks in (("device_idle", idle, "0-7"), ("exposed_communication", comm, "0-3,6")):
        got_ranks, devices, lo, mid, hi, unit, finding = by_rule[rule]
        assert (got_ranks, devices, unit) == (ranks, len(shares), "%")
        assert (lo, mid, hi) == pytest.approx(_expected(shares), abs=1e-3)
        lo, mid, hi = _expected(shares)
        assert f"{lo:.1f}–{hi:.1f} % (median {mid:.1f} %)" in finding and finding.endswith(f"on ranks {ranks}")
    lo, mid, hi = _expected(idle)
    assert (
        by_rule["device_idle"][-1]
        == f"the device was idle {lo:.1f}–{hi:.1f} % (median {mid:.1f} %) of its steps on ranks 0-7"
    )


def test_each_ranks_own_finding_is_kept(run):
    rows = run.sql('SELECT "Rank", "Device", "Rule", "Share(%)", "Finding" FROM advice_by_rank').rows()
    assert sorted((k, rule) for k, _, rule, _, _ in rows) == sorted(
        [(k, "device_idle") for k in range(8)] + [(k, "exposed_communication") for k in COMM_RANKS]
    )
    for k, device, rule, share, finding in rows:
        part = IDLE[k] if rule == "device_idle" else COMM
        assert device == "gpu0" and share == round(100 * part / _total(k), 1), (k, rule)
        assert f"{share:.1f} %" in finding


def test_show_prints_one_row_per_finding(run):
    """`show`'s and the report's advice table (`summary_advice`): the ranks, not a rank and device."""
    rows = run.sql("SELECT * FROM summary_advice(10)").rows()
    # Ranks, Severity, Finding, Suggestion: device idle (over 30 % everywhere) first, as high
    assert [r[:2] for r in rows] == [("0-7", "high"), ("0-3,6", "medium")]
    assert rows[0][2].startswith("the device was idle") and rows[1][2].startswith("communication not hidden")
