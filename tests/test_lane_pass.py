"""The lane pass of an import (`prof_engine.store.lane_pass`: `lanes.c`, and its Python port in
`_native/fallback.py` where the native helpers are not built) gives the lanes the SQL oracle
`overlap_lanes` gives (tests/data/lanes_oracle.sql: DuckDB windows, sharing nothing with the pass),
on random activity: nested, overlapping, touching and empty intervals, equal starts, several ranks,
devices and steps (NULL included), streamed in batches cut anywhere; and the port writes the file
the C pass writes."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import REPO, fixture_path
from prof_engine import _native
from prof_engine._native import fallback, passes
from prof_engine.store import lane_pass

needs_native = pytest.mark.skipif(_native.load() is None, reason="the native helpers are not built here")
# the oracle: an independent statement of the lanes in SQL
BY_MACRO = (
    "CREATE OR REPLACE TEMP TABLE _lanes AS SELECT * FROM overlap_lanes('_lane_activity', "
    "(SELECT list(DISTINCT device ORDER BY device) FROM _lane_activity))"
)
PATHS = ["native", "python"]
ORACLE = REPO / "tests" / "data" / "lanes_oracle.sql"


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    if request.param == "native":
        if _native.load() is None:
            pytest.skip("the native helpers are not built here")
    else:
        monkeypatch.setattr(passes, "load", lambda: None)
    return request.param


def _activity(rng: random.Random, n: int) -> pa.Table:
    rows = []
    for _ in range(n):
        s = rng.randrange(0, 300)
        rows.append(
            {
                "rank": rng.choice([0, 1]),
                "device": rng.choice(["gpu0", "gpu1", "host"]),
                "step": rng.choice([None, 1, 2]),
                "type": rng.choice(["Computing", "Computing", "Communication"]),
                "s": s,
                "e": s + rng.choice([0, 0, 1, 3, 10, 40, 120]),
            }
        )
    return pa.Table.from_pylist(
        rows,
        pa.schema(
            [
                ("rank", pa.int32()),
                ("device", pa.string()),
                ("step", pa.int64()),
                ("type", pa.string()),
                ("s", pa.int64()),
                ("e", pa.int64()),
            ]
        ),
    )


def _lanes(tmp_path, activity: pa.Table, native: bool) -> list[tuple]:
    con = duckdb.connect()
    con.execute(ORACLE.read_text())
    con.register("_activity_arrow", activity)
    con.execute("CREATE TEMP TABLE _lane_activity AS SELECT * FROM _activity_arrow")
    if native:
        lane_pass.lane_pass(con, tmp_path / "_lanes.parquet")
    else:
        con.execute(BY_MACRO)
    return sorted(con.execute("SELECT * FROM _lanes").fetchall(), key=repr)


@pytest.mark.parametrize("seed", range(24))
def test_pass_lanes_are_the_macros(tmp_path, monkeypatch, seed, path):
    rng = random.Random(seed)
    activity = _activity(rng, rng.choice([1, 2, 5, 40, 400]))
    monkeypatch.setattr(lane_pass, "BATCH_ROWS", rng.choice([1, 2, 7, 64, 16384]))
    native = _lanes(tmp_path, activity, True)
    assert native == _lanes(tmp_path, activity, False)
    assert {r[3] for r in native} <= set(lane_pass.TYPES)


def test_no_activity_no_lanes(tmp_path, path):
    empty = _activity(random.Random(0), 0)
    assert _lanes(tmp_path, empty, True) == _lanes(tmp_path, empty, False) == []


def test_one_key_by_hand(tmp_path, path):
    """Computing [0, 10) and [10, 20) (touching: one island), communication [5, 30), an empty
    interval at 40: computing [0, 20), communication [5, 30), not overlapped [20, 30), free [30, 40)."""
    activity = pa.table(
        {
            "rank": pa.array([0, 0, 0, 0], pa.int32()),
            "device": ["gpu0"] * 4,
            "step": [1, 1, 1, 1],
            "type": ["Computing", "Computing", "Communication", "Computing"],
            "s": [0, 10, 5, 40],
            "e": [10, 20, 30, 40],
        }
    )
    assert _lanes(tmp_path, activity, True) == sorted(
        [
            (0, "gpu0", 1, "Computing", 0, 20),
            (0, "gpu0", 1, "Communication", 5, 25),
            (0, "gpu0", 1, "Communication(Not Overlapped)", 20, 10),
            (0, "gpu0", 1, "Free", 30, 10),
        ],
        key=repr,
    )


EDGES = {
    "one empty interval": [(0, "Computing", 5, 5)],
    "only communication": [(0, "Communication", 0, 10), (0, "Communication", 10, 20), (0, "Communication", 30, 40)],
    "communication inside computing": [(0, "Computing", 0, 100), (0, "Communication", 10, 20)],
    "computing inside communication": [
        (0, "Communication", 0, 100),
        (0, "Computing", 10, 20),
        (0, "Computing", 20, 30),
    ],
    "equal starts": [(0, "Computing", 0, 10), (0, "Communication", 0, 30), (0, "Computing", 0, 5)],
    "empty at the end": [(0, "Computing", 0, 10), (0, "Communication", 5, 10), (0, "Computing", 50, 50)],
    "empty at the start": [(0, "Communication", 0, 0), (0, "Computing", 10, 20)],
    "pieces that touch": [
        (0, "Communication", 0, 100),
        (0, "Computing", 10, 20),
        (0, "Computing", 20, 20),
        (0, "Communication", 20, 30),
    ],
    "keys in a row": [(0, "Computing", 0, 10), (1, "Communication", 0, 10), (2, "Computing", 5, 5)],
}


def _edge(rows: list[tuple]) -> pa.Table:
    return pa.table(
        {
            "rank": pa.array([0] * len(rows), pa.int32()),
            "device": ["gpu0"] * len(rows),
            "step": pa.array([r[0] for r in rows], pa.int64()),
            "type": [r[1] for r in rows],
            "s": pa.array([r[2] for r in rows], pa.int64()),
            "e": pa.array([r[3] for r in rows], pa.int64()),
        }
    )


def _file(tmp_path, monkeypatch, activity: pa.Table, native: bool) -> pa.Table:
    tmp_path.mkdir()
    with monkeypatch.context() as m:
        if not native:
            m.setattr(passes, "load", lambda: None)
        _lanes(tmp_path, activity, True)
    return pq.read_table(tmp_path / "_lanes.parquet")


@needs_native
@pytest.mark.parametrize("case", list(EDGES) + ["random"])
def test_python_port_writes_the_native_file(tmp_path, monkeypatch, case):
    """Row for row and in the same order, on edge cases and in batches cut anywhere."""
    activity = _edge(EDGES[case]) if case in EDGES else _activity(random.Random(11), 500)
    monkeypatch.setattr(lane_pass, "BATCH_ROWS", 3)
    native = _file(tmp_path / "c", monkeypatch, activity, True)
    assert _file(tmp_path / "py", monkeypatch, activity, False).equals(native)
    assert native.num_rows or case == "one empty interval"  # (a span of 0 ns has no lanes)


@needs_native
def test_python_port_on_a_fixture(tmp_path):
    """A real Kineto trace imported with the native helpers and without them
    (`PROF_ENGINE_NATIVE=0`: the Python scanner, host pass and lane pass) stores the same lanes."""
    trace = fixture_path("kineto", "hta_nccl_parser_rank0_ws2", "nccl_data.json.gz")
    lanes = {}
    for native in ("1", "0"):
        run = tmp_path / f"native{native}"
        proc = subprocess.run(
            [sys.executable, "-m", "prof_engine", "import", str(trace), "-o", str(run)],
            env={**os.environ, "PROF_ENGINE_NATIVE": native},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        lanes[native] = (
            duckdb.connect()
            .execute(f"SELECT * FROM read_parquet('{run}/lanes/**/*.parquet', hive_partitioning = true) ORDER BY ALL")
            .fetchall()
        )
    assert len(lanes["1"]) > 100 and lanes["1"] == lanes["0"]


def test_out_of_order_is_an_error(path):
    lanes = fallback.PythonLanes() if path == "python" else passes.NativeLanes()
    key, b = pa.array([1, 1], pa.int64()), pa.array([0, 0], pa.uint8())
    with pytest.raises(ValueError, match="out of order"):
        lanes.run(key, b, pa.array([10, 5], pa.int64()), pa.array([20, 20], pa.int64()))
