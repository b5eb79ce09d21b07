"""The run store's files: hive partitions by rank and device, holding the canonical columns with
their schema types, written by `store.partitions.PartitionWriter` whatever order records come in."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine import QueryError, schema
from prof_engine.store.partitions import PartitionWriter, SortedWriter, partition_dir


def _ranks(n: int, rank: int = 0) -> pa.Array:
    return pa.array([rank] * n, pa.int32())


def test_partition_files_hold_the_schema_types(tmp_path):
    step = x("ProfilerStep#3", 0, 100, cat="user_annotation")
    events = [
        step,
        x("aten::linear", 1, 50, **{"External id": 7}),
        x("aten::addmm", 2, 40, **{"External id": 8}),
        x("cudaLaunchKernel", 3, 5, cat="cuda_runtime", correlation=11),
        x("gemm", 60, 10, cat="kernel", pid=0, tid=7, correlation=11, stream=7, device=0, **{"External id": 8}),
        {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 20},
    ]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    for name, table in schema.stored_tables().items():
        # rank and the partition keys are directory levels, not columns of the files
        expected = {c.name: c.arrow_type for c in table.columns if c.name not in ("rank", *schema.PARTITION_KEYS)}
        for path in (run / name).rglob("*.parquet"):
            found = pq.read_schema(path)
            assert {f.name: f.type for f in found} == expected, path
    self_dur = (
        prof_engine.open(run).sql("SELECT name, self_dur FROM slices WHERE kind = 'host_op' ORDER BY name").rows()
    )
    assert self_dur == [("aten::addmm", 40_000), ("aten::linear", 10_000)]


def test_integers_are_stored_as_deltas_and_names_with_dictionaries(tmp_path):
    """Times, durations and ids (integers without a dictionary) are DELTA_BINARY_PACKED, and LZ4
    compressed as dictionary indices are; free text (args) is zstd compressed. Any int64, in any
    order, with NULLs, comes back as written."""
    run = prof_engine.import_trace(
        [write_trace(tmp_path / "t.json", [x("aten::mm", 1, 50), x("aten::add", 60, 5)])], tmp_path / "run"
    )
    [path] = (run / "slices").rglob("*.parquet")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    for column in ("id", "ts", "dur", "self_dur", "external_id"):
        assert "DELTA_BINARY_PACKED" in encodings[column], (column, encodings[column])
    assert "RLE_DICTIONARY" in encodings["name"] and "DELTA_BINARY_PACKED" not in encodings["name"]
    codecs = {meta.column(i).path_in_schema: meta.column(i).compression for i in range(meta.num_columns)}
    assert (codecs["args"], codecs["ts"], codecs["name"]) == ("ZSTD", "LZ4", "LZ4")
    rng = random.Random(3)
    values = [rng.choice([None, 0, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**40), 2**40)]) for _ in range(5000)]
    with ThreadPoolExecutor(1) as pool:
        writer = PartitionWriter(tmp_path / "t", pool)
        writer.write(
            pa.record_batch(
                {
                    "rank": _ranks(len(values)),
                    "device": ["host"] * len(values),
                    "step": pa.nulls(len(values), pa.int64()),
                    "ts": pa.array(values, pa.int64()),
                }
            )
        )
        writer.close()
    [path] = (tmp_path / "t").rglob("*.parquet")
    assert pq.read_table(path).column("ts").to_pylist() == values
    meta = pq.ParquetFile(path).metadata.row_group(0)
    [ts] = [meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "ts"]
    assert "DELTA_BINARY_PACKED" in ts.encodings


def test_partition_directories_are_escaped_as_duckdb_escapes_them(tmp_path):
    devices = ["host", "gpu0", "npu:1", "a/b", "..", "a=b", "a b", "%2F", "é", "~_-.", "'\""]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT rank, device, 1 AS v FROM (SELECT unnest([2, NULL]) AS rank) "
        "CROSS JOIN (SELECT unnest(?) AS device)",
        [devices],
    )
    con.execute(f"COPY t TO '{tmp_path / 'duckdb'}' (FORMAT parquet, PARTITION_BY (rank, device))")
    written = {str(p.parent.relative_to(tmp_path / "duckdb")) for p in (tmp_path / "duckdb").rglob("*.parquet")}
    assert written == {partition_dir(r, d) for r in (2, None) for d in devices}
    assert partition_dir(None, "host") == "rank=__HIVE_DEFAULT_PARTITION__/device=host"


def test_records_in_any_order_land_in_their_partitions(tmp_path):
    """Shuffled records of 24 partitions, a NULL rank's among them (each batch sorted in place),
    and a budget far below the data: partitions get several files, and the dataset holds exactly
    the records written."""
    rng = random.Random(1)
    rows = [("host" if i % 3 else "gpu/0", None if i % 7 == 0 else i % 11, i, f"op{i % 5}" * 20) for i in range(20_000)]
    rng.shuffle(rows)
    table = pa.table(
        {
            "rank": pa.array([r[1] for r in rows], pa.int32()),
            "device": [r[0] for r in rows],
            "id": [r[2] for r in rows],
            "name": [r[3] for r in rows],
        }
    )
    with ThreadPoolExecutor(2) as pool:
        writer = PartitionWriter(tmp_path / "t", pool, budget_bytes=64 << 10)
        for batch in table.to_batches(max_chunksize=1000):
            writer.write(batch)
        assert writer.close() == len(rows)
    files = list((tmp_path / "t").rglob("*.parquet"))
    partitions = {(r[0], r[1]) for r in rows}
    assert len({f.parent for f in files}) == len(partitions)
    assert sum(pq.read_metadata(f).num_row_groups for f in files) > len(partitions)  # written as they came
    back = duckdb.sql(
        f"SELECT device, rank, id, name FROM read_parquet('{tmp_path}/t/**/*.parquet', "
        "hive_partitioning = true, hive_types = {'rank': INTEGER, 'device': VARCHAR}) ORDER BY id"
    ).fetchall()
    assert back == sorted(rows, key=lambda r: r[2])


def test_the_writer_holds_at_most_its_budget_waiting_and_being_written(tmp_path, monkeypatch):
    """A file's records stay in memory until it is written: what waits and what is being written
    together stay within the budget, however slow the writes (each file's write sleeps here)."""
    from prof_engine.store import partitions

    write = partitions._File.write

    def slow(*args):
        time.sleep(0.02)
        write(*args)

    monkeypatch.setattr(partitions._File, "write", slow)
    n = 40_000
    table = pa.table(
        {
            "rank": _ranks(n),
            "device": [("host", "gpu0", "gpu1")[i % 3] for i in range(n)],
            "step": pa.array([i // 4000 for i in range(n)], pa.int64()),
            "name": [f"op{i}" * 8 for i in range(n)],
        }
    )
    budget, held = 256 << 10, []
    with ThreadPoolExecutor(2) as pool:
        writer = PartitionWriter(tmp_path / "t", pool, budget_bytes=budget)
        for batch in table.to_batches(max_chunksize=2000):
            writer.write(batch)
            held.append(writer._waiting_bytes + writer._writing_bytes())
        assert writer.close() == n
    assert max(held) <= budget < sum(b.nbytes for b in table.to_batches())
    back = duckdb.sql(f"SELECT count(*) FROM read_parquet('{tmp_path}/t/**/*.parquet')").fetchall()
    assert back == [(n,)]


def test_a_partition_that_comes_back_after_its_file_closed_gets_a_second_file(tmp_path):
    """A partition no batch added to for a while is written and its file closed (a step of the
    layout before schema 1.1 ends; a device's records stop): records of it that come later go to
    a file of their own, and the dataset holds every record once."""

    def batch(device, ids):
        return pa.record_batch(
            {
                "rank": _ranks(len(ids)),
                "device": [device] * len(ids),
                "step": pa.array([1] * len(ids), pa.int64()),
                "id": pa.array(ids, pa.int64()),
            }
        )

    with ThreadPoolExecutor(2) as pool:
        writer = PartitionWriter(tmp_path / "t", pool)
        writer.write(batch("host", [0, 1]))
        for i in range(4):  # the host is idle: its file is written and closed
            writer.write(batch("gpu0", [10 + i]))
        writer.write(batch("host", [2]))
        assert writer.close() == 7
    host = sorted((tmp_path / "t" / "rank=0" / "device=host").glob("part-*.parquet"))
    assert len(host) == 2 and len(list((tmp_path / "t" / "rank=0" / "device=gpu0").glob("part-*.parquet"))) == 1
    assert sorted(
        pq.read_table(host[0]).column("id").to_pylist() + pq.read_table(host[1]).column("id").to_pylist()
    ) == [0, 1, 2]


def test_large_partition_is_written_in_row_groups(tmp_path):
    n = 300_000
    table = pa.table({"rank": _ranks(n), "device": ["host"] * n, "step": pa.array([1] * n, pa.int64()), "id": range(n)})
    with ThreadPoolExecutor(1) as pool:
        writer = PartitionWriter(tmp_path / "t", pool)
        for batch in table.to_batches(max_chunksize=16_384):
            writer.write(batch)
        writer.close()
    (path,) = Path(tmp_path / "t" / "rank=0" / "device=host").glob("part-*.parquet")
    meta = pq.read_metadata(path)
    assert meta.num_rows == n and meta.num_row_groups == 3


def test_sorted_records_get_a_file_per_rank_and_partition_in_order(tmp_path):
    """Records sorted by rank, device and id (a stored order, `schema.Table.sort_by`), more than a
    row group per rank and device: each gets one file, its row groups in arrival order."""
    rows = [(rank, device, i) for rank in (0, 1, 10) for device in ("gpu0", "gpu/1") for i in range(150_000)]
    rows.sort(key=lambda r: (r[0], r[1]))
    table = pa.table(
        {
            "rank": pa.array([r[0] for r in rows], pa.int32()),
            "device": [r[1] for r in rows],
            "id": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    writer = SortedWriter(tmp_path / "t")
    for batch in table.to_batches(max_chunksize=16_384):
        writer.write(batch)
    assert writer.close() == len(rows)
    files = sorted((tmp_path / "t").rglob("part-*.parquet"))
    assert len(files) == 6
    for f in files:
        assert pq.read_table(f).column("id").to_pylist() == list(range(150_000))
        assert pq.read_metadata(f).num_row_groups == 2 and pq.read_schema(f).names == ["id"]
    assert {f.parent.relative_to(tmp_path / "t").as_posix() for f in files} == {
        partition_dir(r, d) for r in (0, 1, 10) for d in ("gpu0", "gpu/1")
    }


def _two_step_run(tmp_path):
    events = []
    for n, t0 in ((1, 0), (2, 1000)):
        events += [
            x(f"ProfilerStep#{n}", t0, 900, cat="user_annotation"),
            x("aten::mm", t0 + 10, 50),
            {"ph": "s", "cat": "fwdbwd", "id": n, "ts": t0 + 20, "pid": 1, "tid": 1},
            {"ph": "f", "cat": "fwdbwd", "id": n, "ts": t0 + 30, "pid": 1, "tid": 2, "bp": "e"},
        ]
    return prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")


def test_tables_have_files_per_rank_and_device_with_the_step_inside(tmp_path):
    """A directory per step would cost a file each (~1 ms) for a step's few hundred records: every
    table has files per rank and device, its step a column, and a step filter still reaches every
    table."""
    run = _two_step_run(tmp_path)
    for table in ("flows", "slices"):
        assert {p.relative_to(run / table).parent.as_posix() for p in (run / table).rglob("*.parquet")} == {
            "rank=0/device=host"
        }
    with prof_engine.open(run) as r:
        assert r.sql("SELECT step, count(*) FROM flows GROUP BY 1 ORDER BY 1").rows() == [(1, 2), (2, 2)]
        assert r.sql("SELECT step, count(*) FROM slices GROUP BY 1 ORDER BY 1").rows() == [(1, 2), (2, 2)]
    with prof_engine.open(run, steps=[2]) as r:  # the step filter reaches them too
        assert r.sql("SELECT step, count(*) FROM flows GROUP BY 1").rows() == [(2, 2)]
        assert r.sql("SELECT step, count(*) FROM slices GROUP BY 1").rows() == [(2, 2)]


def test_a_partition_is_one_file_of_row_groups_of_whole_step_ranges_in_order(tmp_path):
    """Records arrive step by step; a device's records go to one file (a file costs its reader more
    than a row group), whose row groups each hold a contiguous range of steps (so a step filter
    skips them by their statistics), and together all the records."""
    n = 40_000
    table = pa.table(
        {
            "rank": _ranks(n),
            "device": ["host"] * n,
            "step": pa.array([i // 1000 for i in range(n)], pa.int64()),
            "id": range(n),
            "name": [f"op{i % 13}" * 8 for i in range(n)],
        }
    )
    with ThreadPoolExecutor(2) as pool:
        writer = PartitionWriter(tmp_path / "t", pool, budget_bytes=256 << 10)
        for batch in table.to_batches(max_chunksize=2_000):
            writer.write(batch)
        assert writer.close() == n
    (file,) = (tmp_path / "t" / "rank=0" / "device=host").glob("part-*.parquet")
    f = pq.ParquetFile(file)
    steps = [f.read_row_group(i, columns=["step"]).column(0).to_pylist() for i in range(f.num_row_groups)]
    ranges = [(min(s), max(s)) for s in steps]
    assert len(ranges) > 3 and all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))
    assert f.metadata.num_rows == n


def test_a_query_that_spills_leaves_nothing_behind(tmp_path, monkeypatch):
    """A query larger than DuckDB's memory spills to a directory of its own under the system's
    temporary directory, gone once the run is closed; never to `.tmp` in the current directory."""
    import tempfile
    from pathlib import Path

    from conftest import write_trace, x

    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", [x("op", 1, 1)])], tmp_path / "run")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    r = prof_engine.open(run)
    (spill,) = r.con.execute("SELECT current_setting('temp_directory')").fetchone()
    r.con.execute("SET memory_limit = '64MB'")
    r.con.execute("SET threads = 2")  # on many cores, 64 MB is too little for their buffers: it fails, not spills
    assert r.sql("SELECT count(*) FROM (SELECT * FROM range(20000000) t(a) ORDER BY hash(a))").rows() == [(20_000_000,)]
    assert Path(spill).is_dir() and Path(spill).parent == Path(tempfile.gettempdir())  # it did spill, there
    r.close()
    assert list(work.iterdir()) == [] and not Path(spill).exists()


def test_query_sessions_cap_duckdb_memory(tmp_path, monkeypatch):
    """A query session spills beyond QUERY_MEMORY_LIMIT (or DuckDB's default where that is less)
    rather than take 80 % of the machine; `memory_limit` and PROF_ENGINE_MEMORY_LIMIT set it, and
    a size DuckDB cannot read is one line naming where it came from."""
    from prof_engine._sql import size_bytes as _bytes
    from prof_engine.engine.connection import MEMORY_LIMIT_ENV, QUERY_MEMORY_LIMIT

    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", [x("op", 1, 1)])], tmp_path / "run")

    def limit(r) -> float:
        with r:
            return _bytes(r.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])

    default = _bytes(duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchone()[0])
    assert limit(prof_engine.open(run)) == pytest.approx(min(default, _bytes(QUERY_MEMORY_LIMIT)), rel=0.05)
    assert limit(prof_engine.open(run, memory_limit="300MB")) == pytest.approx(300e6, rel=0.05)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "700MB")
    assert limit(prof_engine.open(run)) == pytest.approx(700e6, rel=0.05)
    assert limit(prof_engine.open(run, memory_limit="300MB")) == pytest.approx(300e6, rel=0.05)  # the argument wins
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(QueryError, match="PROF_ENGINE_MEMORY_LIMIT: 'lots' is not a memory size"):
        prof_engine.open(run)
    assert _bytes("18.8 GiB") == pytest.approx(18.8 * 2**30) and _bytes("2GB") == 2e9 and _bytes("?") is None
