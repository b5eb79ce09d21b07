"""Slices far from the rest of their file: dropped before finalisation, and said.

A slice that starts more than `WINDOW_NS` (7 days) from the median start of its file's slices is
no record of the run (a corrupt or unset clock: a kernel at ts 0 in a trace of 2023 made a step
53 years long and its Preparing -1.7e15 µs). Every importer stages its slices first; here, before
`store.builder.finalize_unit`, such slices are removed from the staged files (with the
communication rows of those slices) and counted as the data-quality finding `values_out_of_range`.
A file whose slices span at most twice the window has none, which one read of the `ts` column
tells; only a file with outliers is read whole and written again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prof_engine.store.quality import add_finding

WINDOW_NS = 7 * 86_400 * 10**9
_BATCH = 1 << 16


def drop_time_outliers(staging: Path, info: dict[str, Any]) -> int:
    """Remove from the staged slices under `staging/slices/` those more than `WINDOW_NS` from the
    median start of all of them (and their rows of `staging/comm/`); record the finding in `info`
    (a source's `SourceFile.info`). Returns how many were dropped."""
    files = sorted((Path(staging) / "slices").glob("*.parquet"))
    lo = hi = None
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(_BATCH, columns=["ts"]):
            mm = pc.min_max(batch.column(0))
            if mm["min"].is_valid:
                lo = mm["min"].as_py() if lo is None else min(lo, mm["min"].as_py())
                hi = mm["max"].as_py() if hi is None else max(hi, mm["max"].as_py())
    if lo is None or hi - lo <= 2 * WINDOW_NS:
        return 0
    ts = np.concatenate([pq.read_table(p, columns=["ts"]).column(0).to_numpy(zero_copy_only=False) for p in files])
    center = int(np.median(ts))
    dropped: list[int] = []
    first: tuple[str, int] | None = None
    for path in files:
        kept_path = path.with_suffix(".kept")
        source = pq.ParquetFile(path)
        with pq.ParquetWriter(kept_path, source.schema_arrow, compression="lz4") as writer:
            for batch in source.iter_batches(_BATCH):
                far = pc.greater(pc.abs(pc.subtract(batch.column("ts"), center)), WINDOW_NS)
                far = pc.fill_null(far, False)
                if pc.any(far).as_py():
                    gone = batch.filter(far)
                    dropped += gone.column("id").to_pylist()
                    if first is None:
                        first = (gone.column("name")[0].as_py() or "", gone.column("ts")[0].as_py())
                    batch = batch.filter(pc.invert(far))
                writer.write_batch(batch)
        kept_path.replace(path)
    if not dropped:
        return 0
    ids = pa.array(dropped, pa.int64())
    for path in sorted((Path(staging) / "comm").glob("*.parquet")):
        table = pq.read_table(path)
        keep = pc.invert(pc.fill_null(pc.is_in(table.column("slice_id"), ids), False))
        if not pc.all(keep).as_py():
            pq.write_table(table.filter(keep), path, compression="lz4")
    assert first is not None  # set with the first row dropped
    name, at = first
    days = abs(at - center) / 86_400e9
    add_finding(
        info,
        "values_out_of_range",
        len(dropped),
        f"first: {name[:80]!r} at {at} ns, {days:,.0f} days from the file's median start: dropped",
    )
    return len(dropped)
