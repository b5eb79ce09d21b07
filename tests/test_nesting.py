"""The nesting pass of finalisation (prof_engine.store.nesting): depth and parent of host records,
in C and in Python, against the definition it replaced (a sweep of +1 at each start and -1 at each
end, ordered by time, ends before starts, zero-length ends after them, longer first)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from prof_engine import _native
from prof_engine.store import nesting
from prof_engine.store.builder import duckdb_connect

PATHS = ["native", "python"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    if request.param == "native":
        if _native.load() is None:
            pytest.skip("no C compiler here: the native nesting pass is not built")
    else:
        monkeypatch.setattr(nesting, "load", lambda: None)
    return request.param


def nest(records: list[tuple[int, int, int, int]], tmp_path, batch_rows: int | None = None,
         monkeypatch=None) -> dict[int, tuple[int, int | None]]:
    """{id: (depth, parent_id)} of `records` (id, lane, ts, dur) through `nesting.nest`."""
    if batch_rows and monkeypatch:
        monkeypatch.setattr(nesting, "BATCH_ROWS", batch_rows)
    con = duckdb_connect(threads=1)
    ids, lanes, ts, durs = zip(*records) if records else ((), (), (), ())
    con.register("_in", pa.table({"id": pa.array(ids, pa.int64()), "lane": pa.array(lanes, pa.int64()),
                                  "ts": pa.array(ts, pa.int64()), "dur": pa.array(durs, pa.int64())}))
    con.execute("CREATE TEMP TABLE _nest_input AS SELECT * FROM _in")
    nesting.nest(con, tmp_path / "nesting.parquet")
    return {i: (d, p) for i, d, p in con.execute("SELECT * FROM _nesting").fetchall()}


def sweep(records: list[tuple[int, int, int, int]]) -> dict[int, tuple[int, int | None]]:
    """The definition: events sorted by (lane, time, class, tie, id), a start's depth is the running
    sum before it, its parent the latest earlier start one level up."""
    events = []
    for i, lane, ts, dur in records:
        events.append((lane, ts, 1, -dur, i, +1))
        events.append((lane, ts + dur, 0 if dur > 0 else 2, dur, i, -1))
    events.sort()
    out, open_count, last = {}, 0, {}
    for _, _, _, _, i, d in events:
        if d > 0:
            out[i] = (open_count, last.get(open_count - 1) if open_count else None)
            last[open_count] = i
        open_count += d
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


def test_a_zero_length_record_holds_the_records_starting_at_its_time(path, tmp_path):
    # 2 is zero-length at 10: 3, starting at 10 after it, nests in it; 4 at 11 does not
    records = [(1, 1, 0, 100), (2, 1, 10, 0), (3, 1, 10, 0), (4, 1, 11, 5)]
    assert nest(records, tmp_path) == {1: (0, None), 2: (1, 1), 3: (2, 2), 4: (1, 1)}


def test_lanes_nest_apart(path, tmp_path):
    records = [(1, 1, 0, 100), (2, 2, 10, 10), (3, 1, 10, 10), (4, 3, 0, 5)]
    assert nest(records, tmp_path) == {1: (0, None), 2: (0, None), 3: (1, 1), 4: (0, None)}


def test_overlapping_records_count_what_is_open(path, tmp_path):
    # 2 starts inside 1 and outlives it; 3 starts after 1 ended, inside 2 alone: depth 1, and its
    # parent is the latest record one level up (1), as the sweep defines it
    records = [(1, 1, 0, 10), (2, 1, 5, 10), (3, 1, 12, 1)]
    assert nest(records, tmp_path) == sweep(records) == {1: (0, None), 2: (1, 1), 3: (1, 1)}


def test_no_records(path, tmp_path):
    assert nest([], tmp_path) == {}


@pytest.mark.parametrize("seed", range(4))
def test_random_records_match_the_sweep_across_batches(path, tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    records = []
    for i in range(3000):
        lane = rng.randrange(4)
        ts = rng.randrange(0, 2000, rng.choice((1, 10, 50)))  # coarse grids: many equal times
        dur = rng.choice((0, 0, rng.randrange(1, 30), rng.randrange(1, 400)))
        records.append((i * 7 + 1, lane, ts, dur))
    assert nest(records, tmp_path, batch_rows=257, monkeypatch=monkeypatch) == sweep(records)


def test_deep_nesting_grows_past_the_first_allocation(path, tmp_path):
    records = [(i + 1, 1, i, 10_000 - 2 * i) for i in range(1000)]
    got = nest(records, tmp_path)
    assert got[1000] == (999, 999) and got == sweep(records)
