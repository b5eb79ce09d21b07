"""The memory DuckDB may use while an import is finalised: from the number of staged records,
within bounds; too little of it is a one-line RunError that says how to give more."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine.store.builder import finalize_memory_limit, host_pass_memory_limit, memory_share


@pytest.mark.parametrize(
    ("records", "threads", "limit"),
    [
        (0, 2, "80MB"),
        (1_000_000, 2, "80MB"),
        (1_000_000, 4, "112MB"),
        (1_000_000, 1, "64MB"),
        (6_000_000, 2, "228MB"),
        (6_000_000, 16, "304MB"),
        (40_000_000, 2, "896MB"),
    ],
)
def test_memory_limit_follows_the_staged_records_within_bounds(tmp_path, records, threads, limit):
    """40 B per record, at least 48 MB plus 16 MB per DuckDB thread, at most 896 MB."""
    for table, n in (("slices", records // 2), ("flows", records - records // 2)):
        (tmp_path / table).mkdir()
        pq.write_table(pa.table({"x": pa.nulls(n, pa.int8())}), tmp_path / table / "unit.parquet")
    assert finalize_memory_limit(tmp_path, threads) == limit


@pytest.mark.parametrize(
    "limit, share",
    [
        ("80MB", "64000000B"),
        ("2GB", "1600000000B"),
        ("1.5GiB", "1288490188B"),
        ("76.2 MiB", "63921192B"),
        ("1kb", "1048576B"),
        ("512 bytes", "1048576B"),
        ("a lot", "a lot"),
        ("1000", "1000"),
    ],
)
def test_a_share_of_a_memory_limit_in_any_unit(limit, share):
    assert memory_share(limit, 0.8) == share


@pytest.mark.parametrize(
    "limit, records, host",
    [
        ("80MB", 2_044_482, "60000000B"),  # 600 MB of JSON: three quarters of the limit
        ("136MB", 4_000_000, "112000000B"),  # 28 B per record is more than three quarters
        ("896MB", 33_800_000, "896000000B"),  # 10 GB: never more than the limit
        ("a lot", 5, "a lot"),
    ],
)
def test_the_host_pass_has_three_quarters_of_the_limit_but_28_bytes_per_record(limit, records, host):
    assert host_pass_memory_limit(limit, records) == host


def test_running_out_of_memory_is_a_run_error(tmp_path):
    events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation")]
    events += [x(f"op{i}", 1 + i, 0.5) for i in range(2000)]
    trace = write_trace(tmp_path / "t.json", events)
    with pytest.raises(
        prof_engine.RunError,
        match=r"ran out of memory within DuckDB's limit of 1MB; pass a larger "
        r"memory_limit to import_trace",
    ):
        prof_engine.import_trace([trace], tmp_path / "run", memory_limit="1MB")
    assert not (tmp_path / "run").exists() and not list(tmp_path.glob(".run.*"))


def test_running_out_of_memory_while_streaming_the_tables_is_a_run_error(tmp_path, monkeypatch):
    """Out of memory while DuckDB streams a final table to Arrow reaches Python as an OSError."""
    from prof_engine.store import builder

    def short_of_memory(*args, **kwargs):
        raise OSError("Out of Memory Error: failed to pin block of size 256.0 KiB (60.8 MiB/61.0 MiB used)")

    monkeypatch.setattr(builder, "copy_tables", short_of_memory)
    trace = write_trace(tmp_path / "t.json", [x("ProfilerStep#1", 0, 1000, cat="user_annotation")])
    with pytest.raises(prof_engine.RunError, match=r"ran out of memory within DuckDB's limit of 64MB"):
        prof_engine.import_trace([trace], tmp_path / "run", memory_limit="64MB")
    assert not (tmp_path / "run").exists() and not list(tmp_path.glob(".run.*"))
