"""The native lane pass of an import (`prof_engine.store.lane_pass`, `lanes.c`) gives the lanes the
SQL macro `overlap_lanes` gives (the algorithm the views run for runs that do not store lanes), on
random activity: nested, overlapping, touching and empty intervals, equal starts, several ranks,
devices and steps (NULL included), streamed in batches cut anywhere."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest

from prof_engine import _native
from prof_engine._resources import data_dir
from prof_engine.store import lane_pass

pytestmark = pytest.mark.skipif(_native.load() is None, reason="no C compiler here: the native lane pass is not built")


def _activity(rng: random.Random, n: int) -> pa.Table:
    rows = []
    for _ in range(n):
        s = rng.randrange(0, 300)
        rows.append({"rank": rng.choice([0, 1]), "device": rng.choice(["gpu0", "gpu1", "host"]),
                     "step": rng.choice([None, 1, 2]), "type": rng.choice(["Computing", "Computing", "Communication"]),
                     "s": s, "e": s + rng.choice([0, 0, 1, 3, 10, 40, 120])})
    return pa.Table.from_pylist(rows, pa.schema([("rank", pa.int32()), ("device", pa.string()), ("step", pa.int64()),
                                                 ("type", pa.string()), ("s", pa.int64()), ("e", pa.int64())]))


def _lanes(tmp_path, activity: pa.Table, native: bool) -> list[tuple]:
    con = duckdb.connect()
    for name in ("_intervals.sql", "_lanes.sql"):
        con.execute((data_dir("queries") / name).read_text())
    con.register("_activity_arrow", activity)
    con.execute("CREATE TEMP TABLE _lane_activity AS SELECT * FROM _activity_arrow")
    if native:
        lane_pass.lane_pass(con, tmp_path / "_lanes.parquet")
    else:
        con.execute(lane_pass.BY_MACRO)
    return sorted(con.execute("SELECT * FROM _lanes").fetchall(), key=repr)


@pytest.mark.parametrize("seed", range(24))
def test_native_lanes_are_the_macros(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    activity = _activity(rng, rng.choice([1, 2, 5, 40, 400]))
    monkeypatch.setattr(lane_pass, "BATCH_ROWS", rng.choice([1, 2, 7, 64, 16384]))
    native = _lanes(tmp_path, activity, True)
    assert native == _lanes(tmp_path, activity, False)
    assert {r[3] for r in native} <= set(lane_pass.TYPES)


def test_no_activity_no_lanes(tmp_path):
    empty = _activity(random.Random(0), 0)
    assert _lanes(tmp_path, empty, True) == _lanes(tmp_path, empty, False) == []


def test_one_key_by_hand(tmp_path):
    """Computing [0, 10) and [10, 20) (touching: one island), communication [5, 30), an empty
    interval at 40: computing [0, 20), communication [5, 30), not overlapped [20, 30), free [30, 40)."""
    activity = pa.table({"rank": pa.array([0, 0, 0, 0], pa.int32()), "device": ["gpu0"] * 4, "step": [1, 1, 1, 1],
                         "type": ["Computing", "Computing", "Communication", "Computing"],
                         "s": [0, 10, 5, 40], "e": [10, 20, 30, 40]})
    assert _lanes(tmp_path, activity, True) == sorted([
        (0, "gpu0", 1, "Computing", 0, 20), (0, "gpu0", 1, "Communication", 5, 25),
        (0, "gpu0", 1, "Communication(Not Overlapped)", 20, 10), (0, "gpu0", 1, "Free", 30, 10)], key=repr)


def test_without_the_native_library_the_macro_makes_them(tmp_path, monkeypatch):
    activity = _activity(random.Random(7), 200)
    native = _lanes(tmp_path, activity, True)
    monkeypatch.setattr(lane_pass, "load", lambda: None)
    assert _lanes(tmp_path / "none", activity, True) == native
    assert not (tmp_path / "none").exists()  # the macro made a table: no file
