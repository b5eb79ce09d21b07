"""Slices far from the dense body of their file: dropped before finalisation, and said.

A slice whose start lies far from where its file's other slices run is no record of the run (a
corrupt or unset clock: a kernel at ts 0 in a trace of 2023 made a step 53 years long and its
Preparing -1.7e15 µs; one kernel moved an hour later made a 2-second trace's step Free 3.6e9 µs).
Every importer stages its slices first; here, before `store.builder.finalize_unit`, such slices
are removed from the staged files (with the communication rows of those slices) and counted as
the data-quality finding `values_out_of_range`.

The rule, per file (one import unit's staged slices), on their starts:
- clusters: the starts cut wherever two consecutive ones are more than `FLOOR_NS` (10 minutes)
  apart; no real profile leaves its device and host without a record for that long within a
  busy phase, and a file spanning less than that has no outlier (one read of `ts` tells);
- the body: the cluster holding the median start, grown by every cluster within reach of it,
  until none is: a cluster is within reach at a gap of `SPAN_FACTOR` (10) times the body's span
  or `FLOOR_NS`, whichever is larger; a busy phase (a cluster of at least `PHASE_SHARE`, 1 %, of
  the file's slices) at a gap up to `WINDOW_NS` (7 days). Nothing further than that is kept;
- the slices outside the body are dropped.
So a trace of steps spread evenly over hours is one cluster, kept whole; two busy phases 20
minutes (or days) apart are both kept; a few slices an hour away from a 2-second trace, or 13 days
away from any trace, are dropped. Clusters are found from each slice's bin of `FLOOR_NS / 4` with
the bin's count, earliest and latest start (exact gaps, memory by occupied bin, not by slice);
only a file with outliers is read whole and written again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prof_engine.store.quality import add_finding

WINDOW_NS = 7 * 86_400 * 10**9  # beyond this from the body, nothing is kept
FLOOR_NS = 10 * 60 * 10**9  # a gap this long or less is never one an outlier stands beyond
SPAN_FACTOR = 10  # a cluster within this many times the body's span of it is part of the run
PHASE_SHARE = 0.01  # a cluster of this share of the slices is a busy phase: kept up to WINDOW_NS
_BIN_NS = FLOOR_NS // 4
_BATCH = 1 << 16


def drop_time_outliers(staging: Path, info: dict[str, Any], tag: str | None = None) -> int:
    """Remove from the staged slices under `staging/slices/` those outside the dense body of their
    starts (the module's rule; and their rows of `staging/comm/`); record the finding in `info`
    (a source's `SourceFile.info`). `tag`: only the files `<tag>.parquet` and `<tag>.<n>.parquet`
    (one sink's, where the sources of a batch stage side by side). Returns how many were dropped."""
    pattern = "*.parquet" if tag is None else f"{tag}*.parquet"
    files = sorted((Path(staging) / "slices").glob(pattern))
    lo = hi = None
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(_BATCH, columns=["ts"]):
            mm = pc.min_max(batch.column(0))
            if mm["min"].is_valid:
                lo = mm["min"].as_py() if lo is None else min(lo, mm["min"].as_py())
                hi = mm["max"].as_py() if hi is None else max(hi, mm["max"].as_py())
    if lo is None or hi - lo <= FLOOR_NS:
        return 0
    body = _body(files, lo)
    if body is None:
        return 0
    start, end, span = body
    dropped: list[int] = []
    first: tuple[str, int] | None = None
    for path in files:
        kept_path = path.with_suffix(".kept")
        source = pq.ParquetFile(path)
        with pq.ParquetWriter(kept_path, source.schema_arrow, compression="lz4") as writer:
            for batch in source.iter_batches(_BATCH):
                ts = batch.column("ts")
                far = pc.fill_null(pc.or_(pc.less(ts, start), pc.greater(ts, end)), False)
                if pc.any(far).as_py():
                    gone = batch.filter(far)
                    dropped += gone.column("id").to_pylist()
                    if first is None:
                        first = (gone.column("name")[0].as_py() or "", gone.column("ts")[0].as_py())
                    batch = batch.filter(pc.invert(far))
                writer.write_batch(batch)
        kept_path.replace(path)
    ids = pa.array(dropped, pa.int64())
    for path in sorted((Path(staging) / "comm").glob(pattern)):
        table = pq.read_table(path)
        keep = pc.invert(pc.fill_null(pc.is_in(table.column("slice_id"), ids), False))
        if not pc.all(keep).as_py():
            pq.write_table(table.filter(keep), path, compression="lz4")
    assert first is not None  # set with the first row dropped (`_body` found some outside)
    name, at = first
    add_finding(
        info,
        "values_out_of_range",
        len(dropped),
        f"first: {name[:80]!r} at {at} ns, {_duration(start - at if at < start else at - end)} from the "
        f"dense body of its file's starts ({_duration(span)} long): dropped",
    )
    return len(dropped)


def _body(files: list[Path], lo: int) -> tuple[int, int, int] | None:
    """(first start, last start, span) of the body of the slices' starts by the module's rule, or
    None where every slice is in it."""
    bins: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    lasts: list[np.ndarray] = []
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(_BATCH, columns=["ts"]):
            ts = batch.column(0).drop_null().to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            if len(ts):
                b, c, f, last = _bins(ts, lo)
                bins.append(b)
                counts.append(c)
                firsts.append(f)
                lasts.append(last)
    b, c, f, last = _bins_merge(
        np.concatenate(bins), np.concatenate(counts), np.concatenate(firsts), np.concatenate(lasts)
    )
    # clusters: cut where the next bin's first start is more than FLOOR_NS after this one's last
    cut = np.flatnonzero(f[1:] - last[:-1] > FLOOR_NS) + 1
    edges = np.concatenate([[0], cut, [len(b)]])
    n = np.add.reduceat(c, edges[:-1])
    first = f[edges[:-1]]
    end = last[edges[1:] - 1]
    if len(n) == 1:
        return None
    total = int(n.sum())
    k = int(np.searchsorted(np.cumsum(n), (total + 1) // 2))  # the cluster holding the median start
    i = j = k  # the body: clusters i..j
    while True:
        span = int(end[j] - first[i])
        reach = min(max(SPAN_FACTOR * span, FLOOR_NS), WINDOW_NS)
        grown = False
        if i > 0:
            gap = int(first[i] - end[i - 1])
            if gap <= reach or (n[i - 1] >= PHASE_SHARE * total and gap <= WINDOW_NS):
                i, grown = i - 1, True
        if j < len(n) - 1:
            gap = int(first[j + 1] - end[j])
            if gap <= reach or (n[j + 1] >= PHASE_SHARE * total and gap <= WINDOW_NS):
                j, grown = j + 1, True
        if not grown:
            break
    if i == 0 and j == len(n) - 1:
        return None
    return int(first[i]), int(end[j]), int(end[j] - first[i])


def _bins(ts: np.ndarray, lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The occupied bins of `ts` (of `_BIN_NS` from `lo`), sorted, with their count, first and last start."""
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    b = (ts - lo) // _BIN_NS
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    ends = np.concatenate([starts[1:], [len(b)]])
    return b[starts], ends - starts, ts[starts], ts[ends - 1]


def _bins_merge(
    b: np.ndarray, c: np.ndarray, f: np.ndarray, last: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bins of several batches as one sorted set of bins."""
    order = np.argsort(b, kind="stable")
    b, c, f, last = b[order], c[order], f[order], last[order]
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    return b[starts], np.add.reduceat(c, starts), np.minimum.reduceat(f, starts), np.maximum.reduceat(last, starts)


def _duration(ns: int) -> str:
    """A length in the unit that reads best: days, hours, minutes or seconds."""
    for unit, size in (("days", 86_400e9), ("hours", 3_600e9), ("minutes", 60e9)):
        if ns >= size:
            return f"{ns / size:,.0f} {unit}" if unit == "days" else f"{ns / size:,.1f} {unit}"
    return f"{ns / 1e9:,.3f} s" if ns >= 10**6 else f"{ns / 1e3:,.3f} µs"
