"""The fill pass (`prof_engine.store.fill_pass`) puts each filled-in row at its staged slice's place,
in windows of any size, streamed in batches cut anywhere: `_fill` read in order is the rows by
position, NULL where no source filled a slice in (an unlisted file's), and a slice filled in twice
or not at all is an error, not a silently shifted pairing. An import split into many windows
writes the same run as one in a single window."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine.errors import RunError
from prof_engine.store import fill_pass as fp

NAMES = ["aten::mm", "aten::add", "aten::relu"]
APIS = ["cudaLaunchKernel", "cudaMemcpyAsync"]


def _setup(tmp_path, rng: random.Random, counts: list[int], unlisted: set[int]):
    """Staged slice files with `counts` rows, `_fill_*` views over random rows for every position
    of the listed files (host, device or step, in a shuffled order), and what each position gets."""
    con = duckdb.connect()
    staged = []
    for part, n in enumerate(counts):
        path = tmp_path / f"part-{part}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(n), pa.int64())}), path)
        staged.append(str(path))
    host, device, steps, expected = [], [], [], {}
    at = 0
    for part, n in enumerate(counts):
        for row in range(n):
            position, at = at, at + 1
            if part in unlisted:
                expected[position] = {}
                continue
            maybe = lambda v: None if rng.random() < 0.3 else v  # noqa: E731
            source = rng.choice(["host", "host", "device", "step"])
            common = {
                "_part": part,
                "_row": row,
                "step": maybe(rng.randrange(5)),
                "depth": maybe(rng.randrange(4)),
                "parent_id": maybe(rng.randrange(1 << 40)),
            }
            if source == "host":
                values = {**common, "self_dur": maybe(rng.randrange(10**6))}
                host.append(values)
            elif source == "device":
                values = {
                    **common,
                    "launch_id": maybe(rng.randrange(1 << 40)),
                    "launch_name": maybe(rng.randrange(len(NAMES))),
                    "launch_shapes": None,
                    "launch_types": maybe(0),
                    "wait": maybe(rng.randrange(100)),
                    "launch_api": maybe(rng.randrange(len(APIS))),
                    "launch_api_ts": maybe(rng.randrange(1 << 50)),
                    "launch_api_dur": maybe(rng.randrange(1000)),
                }
                device.append(values)
            else:
                values = common
                steps.append(values)
            expected[position] = {k: v for k, v in values.items() if not k.startswith("_")}
    for rows in (host, device, steps):
        rng.shuffle(rows)
    int64, int32, code = pa.int64(), pa.int32(), pa.uint8()
    types = {
        "_part": pa.uint64(),
        "_row": int64,
        "step": int64,
        "depth": int32,
        "parent_id": int64,
        "self_dur": int64,
        "launch_id": int64,
        "launch_name": code,
        "launch_shapes": code,
        "launch_types": code,
        "wait": int64,
        "launch_api": code,
        "launch_api_ts": int64,
        "launch_api_dur": int64,
    }
    for name, rows, columns in (
        ("_fill_host", host, ["_part", "_row", "step", "depth", "parent_id", "self_dur"]),
        (
            "_fill_device",
            device,
            [
                "_part",
                "_row",
                "step",
                "depth",
                "parent_id",
                "launch_id",
                "launch_name",
                "launch_shapes",
                "launch_types",
                "wait",
                "launch_api",
                "launch_api_ts",
                "launch_api_dur",
            ],
        ),
        ("_fill_steps", steps, ["_part", "_row", "step", "depth", "parent_id"]),
    ):
        con.register(f"{name}_arrow", pa.Table.from_pylist(rows, pa.schema([(c, types[c]) for c in columns])))
        con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {name}_arrow")
    con.execute(
        f"CREATE TEMP VIEW _fill_dictionaries AS SELECT {NAMES} AS launch_name, []::VARCHAR[] AS launch_shapes, "
        f"['float'] AS launch_types, {APIS} AS launch_api"
    )
    listed = len(host) + len(device) + len(steps)
    con.execute(f"CREATE TEMP VIEW _s AS SELECT * FROM range({listed})")
    return con, staged, expected


def _filled(con) -> list[dict]:
    return con.sql("SELECT * EXCLUDE (position) FROM _fill ORDER BY position").to_arrow_table().to_pylist()


@pytest.mark.parametrize("seed", range(12))
def test_rows_land_at_their_slices(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    counts = [rng.choice([0, 1, 5, 40, 300]) for _ in range(rng.choice([1, 2, 4]))]
    unlisted = {p for p in range(len(counts)) if rng.random() < 0.2}
    monkeypatch.setattr(fp, "WINDOW_ROWS", rng.choice([1, 3, 64, 1 << 18]))
    monkeypatch.setattr(fp, "BATCH_ROWS", rng.choice([1, 7, 65_536]))
    con, staged, expected = _setup(tmp_path, rng, counts, unlisted)
    fp.fill_pass(con, staged, tmp_path / "_fill.parquet")
    got = _filled(con)
    assert len(got) == sum(counts)
    dictionaries = {"launch_name": NAMES, "launch_types": ["float"], "launch_api": APIS}
    for position, row in enumerate(got):
        want = {c: None for c, _ in fp.COLUMNS}
        for column, value in expected[position].items():
            want[column] = dictionaries[column][value] if column in dictionaries and value is not None else value
        assert row == want, position
    assert not (tmp_path / "_fill").exists()  # the windows' files are gone
    # a staged slice's position (`fill_position`) is its row's `position` in `_fill`
    slices = [(part, row) for part, n in enumerate(counts) for row in range(n)]
    if slices:
        con.register("_slices_arrow", pa.table({"part": [p for p, _ in slices], "row": [r for _, r in slices]}))
        assert con.execute("SELECT list(fill_position(part, row) ORDER BY part, row) FROM _slices_arrow").fetchall()[0][
            0
        ] == list(range(len(slices)))
        positions = con.execute("SELECT list(position ORDER BY position) FROM _fill").fetchall()[0][0]
        assert positions == list(range(len(slices)))


@pytest.mark.parametrize(
    "seed, counts, source, match",
    [
        (
            1,
            [50, 50],
            "SELECT * FROM _fill_steps_arrow UNION ALL (SELECT * FROM _fill_steps_arrow LIMIT 1)",
            "filled in twice",
        ),
        (2, [30], "SELECT * FROM _fill_steps_arrow LIMIT 0", "rows filled in for"),
        (
            3,
            [20, 20],
            "SELECT _part, _row + 1000 AS _row, step, depth, parent_id FROM _fill_steps_arrow",
            "out of range",
        ),
    ],
    ids=["twice", "missing", "out-of-range"],
)
def test_a_slice_filled_in_wrong_is_an_error(tmp_path, monkeypatch, seed, counts, source, match):
    con, staged, _ = _setup(tmp_path, random.Random(seed), counts, set())
    con.execute(f"CREATE OR REPLACE TEMP VIEW _fill_steps AS {source}")
    for window in (1 << 18, 8):  # one window, and several
        monkeypatch.setattr(fp, "WINDOW_ROWS", window)
        with pytest.raises(RunError, match=match):
            fp.fill_pass(con, staged, tmp_path / "_fill.parquet")


def test_no_slices(tmp_path):
    con, staged, _ = _setup(tmp_path, random.Random(4), [], set())
    fp.fill_pass(con, staged, tmp_path / "_fill.parquet")
    assert _filled(con) == []


def _trace(path):
    """Host ops in steps on two threads, each launching a kernel on a GPU stream."""
    events = []
    for step in range(6):
        t0 = step * 1000.0
        events.append(x(f"ProfilerStep#{step}", t0, 990, cat="user_annotation"))
        for k in range(20):
            ts = t0 + 5 + k * 40
            tid = 1 + k % 2
            events.append(x("aten::mm", ts, 30, tid=tid, **{"External id": step * 100 + k}))
            events.append(x("cudaLaunchKernel", ts + 2, 5, cat="cuda_runtime", tid=tid, correlation=step * 100 + k))
            events.append(
                x(
                    f"gemm_{k % 3}",
                    ts + 10,
                    12,
                    cat="kernel",
                    pid=0,
                    tid=7,
                    correlation=step * 100 + k,
                    **{"External id": step * 100 + k, "device": 0, "stream": 7},
                )
            )
    return write_trace(path, events)


def test_an_import_in_many_windows_is_the_same_run(tmp_path, monkeypatch):
    trace = _trace(tmp_path / "t.json")
    prof_engine.import_trace([trace], tmp_path / "one")
    monkeypatch.setattr(fp, "WINDOW_ROWS", 7)
    monkeypatch.setattr(fp, "BATCH_ROWS", 5)
    prof_engine.import_trace([trace], tmp_path / "many")
    con = duckdb.connect()
    for table in ("slices", "lanes", "lane_totals"):
        read = [
            f"SELECT * FROM read_parquet('{tmp_path / run / table}/**/*.parquet', hive_partitioning=true)"
            for run in ("one", "many")
        ]
        assert con.execute(f"SELECT count(*) FROM ({read[0]})").fetchall()[0][0] > 0
        for a, b in ((0, 1), (1, 0)):
            assert con.execute(f"SELECT count(*) FROM ({read[a]} EXCEPT ALL {read[b]})").fetchall()[0][0] == 0
    kernels = con.execute(
        f"SELECT count(*), count(launch_name), count(launch_api) FROM read_parquet("
        f"'{tmp_path / 'many' / 'slices'}/**/*.parquet', hive_partitioning=true) "
        "WHERE kind = 'kernel'"
    ).fetchall()[0]
    assert kernels == (120, 120, 120)


def test_a_pairing_out_of_step_is_an_error(tmp_path, monkeypatch):
    """The final pass checks each staged slice's position against its row's: rows read out of step
    with the staged slices are an error, not a run of shifted columns."""
    from test_finalize_files import stage

    from prof_engine.store import builder
    from prof_engine.store.builder import finalize_unit

    def unit_of(name):
        unit = tmp_path / name
        for file, first_id in ((0, 10), (1, 20)):
            stage(unit / "staging", file, first_id)
        return unit

    def shifted(con, staged, path):  # the slices as if read one row later than their columns
        fp.fill_pass(con, staged, path)
        con.execute("CREATE OR REPLACE TEMP MACRO fill_position(part, row) AS part * 3 + row + 1")

    monkeypatch.setattr(builder, "fill_pass", shifted)
    with pytest.raises(Exception, match="slices out of step with their computed columns"):
        finalize_unit(unit_of("shifted"), [(0, 3, 0), (1, 4, 0)])
    monkeypatch.undo()
    assert finalize_unit(unit_of("in_step"), [(0, 3, 0), (1, 4, 0)]).rows["slices"] == 6
