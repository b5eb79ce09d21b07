"""The host pass of finalisation (prof_engine.store.host_pass): the step, depth and parent of host
records, in C and in Python; nesting against torch.profiler's own tree
(`EventList._populate_cpu_children`, run here on the same intervals)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from prof_engine import _native
from prof_engine._native import passes
from prof_engine.store import host_pass
from prof_engine.store.builder import duckdb_connect

PATHS = ["native", "python"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    if request.param == "native":
        if _native.load() is None:
            pytest.skip("no C compiler here: the native nesting pass is not built")
    else:
        monkeypatch.setattr(passes, "load", lambda: None)
    return request.param


def run_pass(
    records: list[tuple],
    tmp_path,
    steps: list[tuple[int, int, int, int]] = (),
    batch_rows: int | None = None,
    monkeypatch=None,
) -> dict[int, tuple]:
    """{id: (step, depth, parent_id)} of `records` (id, lane, ts, dur[, nests, rank]) through
    `host_pass.host_pass`, with `steps` (rank, step, start, end)."""
    if batch_rows and monkeypatch:
        monkeypatch.setattr(host_pass, "BATCH_ROWS", batch_rows)
    con = duckdb_connect(threads=1)
    records = [(*r, *(1, 0)[len(r) - 4 :]) for r in records]  # nests, rank 0 by default
    ids, lanes, ts, durs, nests, ranks = zip(*records) if records else ((),) * 6
    # a lane is a thread: pid as given, and every other lane's tid NULL, as some sources write it
    con.register(
        "_in",
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "rank": pa.array(ranks, pa.int32()),
                "pid": pa.array([f"p{lane // 2}" for lane in lanes]),
                "tid": pa.array([None if lane % 2 else "t" for lane in lanes], pa.string()),
                "ts": pa.array(ts, pa.int64()),
                "dur": pa.array(durs, pa.int64()),
                "nests": pa.array(nests, pa.uint8()),
            }
        ),
    )
    con.execute("CREATE TEMP TABLE _host_input AS SELECT * FROM _in")
    rank, step, start, end = zip(*steps) if steps else ((),) * 4
    con.register(
        "_st",
        pa.table(
            {
                "rank": pa.array(rank, pa.int32()),
                "step": pa.array(step, pa.int64()),
                "start_ns": pa.array(start, pa.int64()),
                "end_ns": pa.array(end, pa.int64()),
            }
        ),
    )
    con.execute("CREATE TEMP TABLE _steps AS SELECT * FROM _st")
    host_pass.host_pass(con, tmp_path / "host.parquet")
    assert con.sql("SELECT * FROM _host").columns == ["id", "rank", "ts", "dur", "step", "depth", "parent_id"]
    return {i: (s, d, p) for i, s, d, p in con.execute("SELECT id, step, depth, parent_id FROM _host").fetchall()}


def nest(
    records: list[tuple[int, int, int, int]], tmp_path, batch_rows: int | None = None, monkeypatch=None
) -> dict[int, tuple[int, int | None]]:
    """{id: (depth, parent_id)} of `records` (id, lane, ts, dur), every one nesting."""
    return {i: (d, p) for i, (_, d, p) in run_pass(records, tmp_path, (), batch_rows, monkeypatch).items()}


def torch_tree(records: list[tuple[int, int, int, int]]) -> dict[int, tuple[int, int | None]]:
    """The oracle: torch.profiler's tree of the same intervals (a lane is a thread), built by
    torch's own `EventList._populate_cpu_children`; depth is the number of ancestors. Events are
    given in id order: torch's sort is stable, and the pass breaks ties by id."""
    profiler_util = pytest.importorskip("torch.autograd.profiler_util")
    events = {
        i: profiler_util.FunctionEvent(id=i, name=str(i), thread=lane, start_us=ts, end_us=ts + max(dur, 0))
        for i, lane, ts, dur in sorted(records)
    }
    profiler_util.EventList(list(events.values()))._populate_cpu_children()
    out = {}
    for i, e in events.items():
        depth, p = 0, e.cpu_parent
        while p is not None:
            depth, p = depth + 1, p.cpu_parent
        out[i] = (depth, e.cpu_parent.id if e.cpu_parent is not None else None)
    return out


def test_a_tree_of_ops(path, tmp_path):
    #   1 [0, 100)          2 [100, 150) touches 1: not its child
    #     3 [10, 50)  4 [50, 90)  (4 touches 3: siblings)
    #       5 [20, 30)
    records = [(1, 1, 0, 100), (2, 1, 100, 50), (3, 1, 10, 40), (4, 1, 50, 40), (5, 1, 20, 10)]
    assert nest(records, tmp_path) == {1: (0, None), 2: (0, None), 3: (1, 1), 4: (1, 1), 5: (2, 3)}


def test_equal_starts_nest_the_shorter_in_the_longer_then_by_id(path, tmp_path):
    records = [(7, 1, 0, 10), (3, 1, 0, 100), (5, 1, 0, 10)]
    assert nest(records, tmp_path) == {3: (0, None), 5: (1, 3), 7: (2, 5)}


def test_a_zero_length_record_holds_nothing(path, tmp_path):
    # 2 is zero-length at 10: 3, also at 10, is its sibling (it starts at 2's end), as in torch
    records = [(1, 1, 0, 100), (2, 1, 10, 0), (3, 1, 10, 0), (4, 1, 11, 5)]
    assert nest(records, tmp_path) == {1: (0, None), 2: (1, 1), 3: (1, 1), 4: (1, 1)}


def test_lanes_nest_apart(path, tmp_path):
    records = [(1, 1, 0, 100), (2, 2, 10, 10), (3, 1, 10, 10), (4, 3, 0, 5)]
    assert nest(records, tmp_path) == {1: (0, None), 2: (0, None), 3: (1, 1), 4: (0, None)}


def test_a_record_overlapping_another_closes_it_as_torch_does(path, tmp_path):
    #   1 [0, 10)        4 [1, 3) in 1
    #       2 [5, 15)    2 starts inside 1 and outlives it: not its child, and 1 holds nothing after
    #         3 [6, 8)   inside 1 and 2: 2's child (the top of the stack)
    #             5 [12, 13)  inside 2 alone: 2's child, never 1's (which has ended)
    records = [(1, 1, 0, 10), (2, 1, 5, 10), (3, 1, 6, 2), (4, 1, 1, 2), (5, 1, 12, 1)]
    want = {1: (0, None), 4: (1, 1), 2: (0, None), 3: (1, 2), 5: (1, 2)}
    assert nest(records, tmp_path) == want
    assert torch_tree(records) == want


def test_an_overlapping_record_inside_a_parent_stays_its_child(path, tmp_path):
    # 0 [0, 100) holds 1 [10, 30) and 2 [20, 40), which overlap: 2 pops 1 and is 0's child too
    records = [(10, 1, 0, 100), (1, 1, 10, 20), (2, 1, 20, 20), (3, 1, 25, 2), (4, 1, 35, 1)]
    want = {10: (0, None), 1: (1, 10), 2: (1, 10), 3: (2, 2), 4: (2, 2)}
    assert nest(records, tmp_path) == want == torch_tree(records)


def test_no_records(path, tmp_path):
    assert nest([], tmp_path) == {}


@pytest.mark.parametrize("seed", range(4))
def test_random_records_match_torchs_tree_across_batches(path, tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    records = []
    for i in range(3000):
        lane = rng.randrange(4)
        ts = rng.randrange(0, 2000, rng.choice((1, 10, 50)))  # coarse grids: many equal times
        dur = rng.choice((0, 0, rng.randrange(1, 30), rng.randrange(1, 400)))
        records.append((i * 7 + 1, lane, ts, dur))
    assert nest(records, tmp_path, batch_rows=257, monkeypatch=monkeypatch) == torch_tree(records)


def test_deep_nesting_grows_past_the_first_allocation(path, tmp_path):
    records = [(i + 1, 1, i, 10_000 - 2 * i) for i in range(1000)]
    got = nest(records, tmp_path)
    assert got[1000] == (999, 999) and all(got[i] == (i - 1, i - 1 or None) for i in got)


def test_steps_are_the_spans_holding_each_start_per_rank(path, tmp_path):
    steps = [(0, 5, 100, 200), (0, 6, 200, 300), (0, 8, 400, 450), (1, 5, 150, 250)]
    # (id, lane, ts, dur, nests, rank): rank 0 on lanes 1 and 2, rank 1 on lane 3; rank 2 has no steps
    records = [
        (1, 1, 50, 10, 1, 0),
        (2, 1, 100, 500, 1, 0),
        (3, 1, 199, 1, 1, 0),
        (4, 1, 200, 1, 1, 0),
        (5, 1, 350, 1, 1, 0),
        (6, 1, 449, 9, 1, 0),
        (7, 1, 450, 1, 1, 0),
        (8, 2, 120, 1, 0, 0),
        (9, 3, 120, 1, 1, 1),
        (10, 3, 150, 1, 0, 1),
        (11, 3, 260, 1, 1, 1),
        (12, 4, 160, 1, 1, 2),
    ]
    got = run_pass(records, tmp_path, steps)
    assert {i: s for i, (s, _, _) in got.items()} == {
        1: None,
        2: 5,
        3: 5,
        4: 6,
        5: None,
        6: 8,
        7: None,
        8: 5,
        9: None,
        10: 5,
        11: None,
        12: None,
    }


def test_records_that_do_not_nest_get_a_step_but_no_depth_and_leave_the_nesting_alone(path, tmp_path):
    # 2 does not nest (a comm record, a range whose depth the source stated): 3 nests in 1, not in 2
    records = [(1, 1, 0, 100, 1), (2, 1, 10, 50, 0), (3, 1, 20, 5, 1)]
    got = run_pass(records, tmp_path, [(0, 1, 0, 1000)])
    assert got == {1: (1, 0, None), 2: (1, None, None), 3: (1, 1, 1)}


def test_a_step_record_without_a_step_number_gives_its_span_none(path, tmp_path):
    # a live run's batch may stage a step record whose step it does not know
    got = run_pass([(1, 1, 150, 1), (2, 1, 250, 1), (3, 1, 350, 1)], tmp_path, [(0, None, 100, 300), (0, 7, 300, 400)])
    assert {i: s for i, (s, _, _) in got.items()} == {1: None, 2: None, 3: 7}


def test_step_at_finds_the_step_holding_a_start_in_any_order(path, tmp_path):
    con = duckdb_connect(threads=1)
    con.execute(
        "CREATE TEMP TABLE _host_input AS SELECT 1::BIGINT id, 0 rank, 'p' pid, 't' tid, 0::BIGINT ts, "
        "0::BIGINT dur, 1::UTINYINT nests"
    )
    con.execute(
        "CREATE TEMP TABLE _steps AS SELECT * FROM (VALUES (0, 5::BIGINT, 100::BIGINT, 200::BIGINT), "
        "(0, 6, 200, 300), (0, NULL, 300, 400), (2, 9, 100, 200)) t(rank, step, start_ns, end_ns)"
    )
    host_pass.host_pass(con, tmp_path / "host.parquet")
    got = con.execute(
        "SELECT step_at(r, t) FROM (VALUES (0, 250), (0, 150), (0, 99), (0, 200), (0, 350), (0, 400), "
        "(1, 150), (2, 150), (3, 150), (NULL, 150), (0, NULL)) v(r, t)"
    ).fetchall()
    assert [s for (s,) in got] == [6, 5, None, 6, None, None, None, 9, None, None, None]


@pytest.mark.skipif(_native.load() is None, reason="no C compiler here: the native nesting pass is not built")
@pytest.mark.parametrize("seed", range(3))
def test_python_port_gives_the_native_columns(tmp_path, monkeypatch, seed):
    """The port (`_native/fallback.py`) against `host_pass.c` on the odd cases at once: negative and
    zero durations, ends past the clock's end, records that do not nest, several ranks (one with no
    steps), overlapping steps and equal starts, steps without a number, batches cut anywhere; and
    `step_at` on random starts, NULLs included."""
    rng = random.Random(seed)
    big = (1 << 63) - 1_000
    records = []
    for i in range(2000):
        ts = rng.choice((rng.randrange(0, 3000, rng.choice((1, 25))), big - rng.randrange(0, 50)))
        dur = rng.choice((0, -5, rng.randrange(1, 40), rng.randrange(1, 600), 1 << 62))
        records.append((i * 3 + 1, rng.randrange(5), ts, dur, rng.choice((1, 1, 0)), rng.randrange(4)))
    steps = []
    for rank in range(3):
        for k in range(rng.randrange(8)):
            start = rng.randrange(0, 3000, 50)
            steps.append((rank, rng.choice((k, k, None)), start, start + rng.choice((0, 50, 300))))
    steps.append((1, 99, big - 20, big))
    starts = [
        (rng.choice((0, 1, 2, 3, None)), rng.choice((rng.randrange(-10, 3100), big - 10, None))) for _ in range(500)
    ]

    def both() -> tuple[dict, list]:
        got = run_pass(records, tmp_path / "run", steps, batch_rows=rng.choice((1, 7, 300)), monkeypatch=monkeypatch)
        con = duckdb_connect(threads=1)
        con.execute(
            "CREATE TEMP TABLE _host_input AS SELECT 1::BIGINT id, 0 rank, 'p' pid, 't' tid, 0::BIGINT ts, 0::BIGINT dur, 1::UTINYINT nests"
        )
        con.register(
            "_st",
            pa.table(
                {
                    "rank": [s[0] for s in steps],
                    "step": [s[1] for s in steps],
                    "start_ns": [s[2] for s in steps],
                    "end_ns": [s[3] for s in steps],
                }
            ),
        )
        con.execute(
            "CREATE TEMP TABLE _steps AS SELECT rank::INTEGER rank, step::BIGINT step, start_ns, end_ns FROM _st"
        )
        host_pass.host_pass(con, tmp_path / "step_at.parquet")
        con.register(
            "_at",
            pa.table(
                {"r": pa.array([r for r, _ in starts], pa.int32()), "t": pa.array([t for _, t in starts], pa.int64())}
            ),
        )
        return got, [s for (s,) in con.execute("SELECT step_at(r, t) FROM _at").fetchall()]

    (tmp_path / "run").mkdir()
    native = both()
    monkeypatch.setattr(passes, "load", lambda: None)
    port = both()
    assert port == native
    assert any(s is not None for s in native[1]) and any(d is not None and d > 1 for _, d, _ in native[0].values())
