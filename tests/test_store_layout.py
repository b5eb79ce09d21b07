"""The run store's files: hive partitions by device and step, holding the canonical columns with
their schema types."""

from __future__ import annotations

import pyarrow.parquet as pq

import prof_engine
from conftest import write_trace, x
from prof_engine import schema
from prof_engine.schema import PARTITION_KEYS


def test_partition_files_hold_the_schema_types(tmp_path):
    step = x("ProfilerStep#3", 0, 100, cat="user_annotation")
    events = [step, x("aten::linear", 1, 50, **{"External id": 7}), x("aten::addmm", 2, 40, **{"External id": 8}),
              x("cudaLaunchKernel", 3, 5, cat="cuda_runtime", correlation=11),
              x("gemm", 60, 10, cat="kernel", pid=0, tid=7, correlation=11, stream=7, device=0, **{"External id": 8}),
              {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 20}]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    for name, table in schema.stored_tables().items():
        expected = {c.name: c.arrow_type for c in table.columns if c.name not in PARTITION_KEYS}
        for path in (run / name).rglob("*.parquet"):
            found = pq.read_schema(path)
            assert {f.name: f.type for f in found} == expected, path
    self_dur = prof_engine.open(run).sql("SELECT name, self_dur FROM slices WHERE kind = 'host_op' ORDER BY name").rows()
    assert self_dur == [("aten::addmm", 40_000), ("aten::linear", 10_000)]
