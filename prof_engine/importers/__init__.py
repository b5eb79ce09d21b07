"""Importers: foreign trace formats → a prof-engine run. The formats are `registry.FORMATS`; this
module expands the sources into units by asking them (and nothing else), then imports the units."""

from __future__ import annotations

import errno
import hashlib
import multiprocessing
import os
import re
import shutil
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from prof_engine import _ray
from prof_engine._process import start_worker
from prof_engine.errors import InputError, ProfEngineError
from prof_engine.importers import registry, unsupported
from prof_engine.importers.formats import lead
from prof_engine.importers.jsonstream import open_bytes
from prof_engine.importers.units import BadTime
from prof_engine.store.builder import (
    FINALIZE_THREADS,
    Finalized,
    MemorySink,
    RunBuilder,
    SourceFile,
    StagingSink,
    finalize_unit,
)
from prof_engine.store.location import is_uri
from prof_engine.store.outliers import FLOOR_NS as OUTLIER_FLOOR_NS
from prof_engine.store.outliers import drop_time_outliers
from prof_engine.store.quality import add_finding

Progress = Callable[[int, int], None]


def detect(path: Path) -> str:
    """Format of one source file (`registry.FORMATS` in order): by its name where a format claims
    the name alone, else by its first 64 KiB."""
    for fmt in registry.FORMATS:
        if fmt.sniff is None and fmt.files is not None and fmt.files.fullmatch(path.name):
            return fmt.name
    try:
        with open_bytes(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError, zlib.error) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise InputError(f"{path}: cannot read ({reason}; truncated or corrupt gzip?)") from None
    if not lead(head):
        raise InputError(f"{path}: file is empty")
    for fmt in registry.FORMATS:
        if fmt.sniff is not None and fmt.sniff(path, head):
            return fmt.name
    raise InputError(f"{path}: unknown file type (prof-engine imports Chrome/Kineto trace JSON, .json or .json.gz)")


@dataclass(frozen=True)
class Source:
    """One unit of import: a trace file, an Ascend rank directory, a msprof PROF_* or device directory."""

    path: Path
    format: str  # its format's name (`registry.FORMATS`)


@dataclass(frozen=True)
class LeftOut:
    """A file of a scanned directory that is not imported, and why (the manifest's `left_out`)."""

    path: Path
    reason: str


# Ascend-side directories: whatever lies under one is that profiler's output, never a Kineto trace.
_ASCEND_DIR = re.compile(r".*_ascend_(pt|ms)|PROF_.*")


def expand_sources(sources: Sequence[Path], merge_unrelated: bool = False) -> tuple[list[Source], list[LeftOut]]:
    """What `sources` name, and the files of their directories left out. Files as given;
    directories by their profiler outputs (Ascend rank directories, msprof PROF_* directories,
    MindSpore folders) and the *.json / *.json.gz traces outside them. Every other file of a
    directory is left out with its reason (documentation and hidden files aside). Sources of
    two families (Ascend output and Kineto traces) are refused as two jobs unless `merge_unrelated`."""
    found: list[Source] = []
    left: list[LeftOut] = []
    for src in map(Path, sources):
        if not src.exists():
            raise InputError(f"{src}: no such file or directory")
        if not src.is_file() and not src.is_dir():
            raise InputError(
                f"{src}: not a trace file or a directory (a device, a pipe or a socket); "
                f"give the trace file or the profiler's output directory"
            )
        if src.is_file():
            found.append(Source(src, detect(src)))
            continue
        units, dropped = _expand_dir(src)
        found.extend(units)
        left.extend(dropped)
    _refuse_duplicates(found)
    if not merge_unrelated:
        _refuse_two_families(found, sources)
    return found, left


def _profiler_units(src: Path) -> list[Source]:
    """The profiler units at or under the directory `src`: those of the first format in
    `registry.FORMATS` that finds any, with the formats of its layout after it (a unit inside one
    found before is part of that one). First, not all: a torch_npu rank directory holds msprof
    PROF_* directories and MindSpore CPU op files of its own."""
    found: list[Source] = []
    layout = ""
    for fmt in registry.FORMATS:
        if fmt.units is None or (found and (not layout or fmt.layout != layout)):
            continue
        new = [p for p in fmt.units(src) if not any(p.is_relative_to(u.path) for u in found)]
        if new and not found:
            layout = fmt.layout
        found += [Source(p, fmt.name) for p in new]
    return found


def _claimed(unit: Source, root: Path) -> Path:
    """The directory a profiler unit stands for: its nearest Ascend-side directory (a rank's
    `*_ascend_pt`, a `PROF_*`), else the unit itself (a directory) or its folder (a file)."""
    here = unit.path if unit.path.is_dir() else unit.path.parent
    for d in (here, *here.parents):
        if d == root.parent or not d.is_relative_to(root):
            break
        if _ASCEND_DIR.fullmatch(d.name):
            return d
    return here


def _expand_dir(src: Path) -> tuple[list[Source], list[LeftOut]]:
    profiler = _profiler_units(src)
    if not profiler and (reason := unsupported.explain(src)) is not None:
        raise InputError(reason)
    claimed = [_claimed(u, src) for u in profiler]
    # a unit that is a file (MindSpore CPU's timestamp file) claims its folder's side files, but a
    # Chrome/Kineto trace there is still found: else it would be dropped without a word
    by_file = {c for u, c in zip(profiler, claimed, strict=True) if u.path.is_file() and c == u.path.parent}
    loose = sorted(
        p
        for p in src.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(src).parts)
        and not unsupported.DOCS.fullmatch(p.name)  # README, PROVENANCE.md, *.done: never profile data
        and not any(p.is_relative_to(c) and not (c == p.parent and c in by_file and _a_trace(p)) for c in claimed)
    )
    traces: list[Source] = []
    left: list[LeftOut] = []
    runs = {m.parent for m in loose if m.name == "manifest.json"}  # prof-engine runs: this scan's own output
    for p in loose:
        rel = p.relative_to(src)
        if run := next((r for r in runs if p.is_relative_to(r)), None):
            if p.parent == run and p.name == "manifest.json":
                left.append(LeftOut(run, "a prof-engine run (import's own output)"))
            continue
        if any(unsupported.ANALYZE.fullmatch(d.name) for d in (p, *rel.parents)):
            left.append(LeftOut(p, "msprof-analyze output: a report derived from profiles, not a trace"))
            continue
        if any(_ASCEND_DIR.fullmatch(d.name) for d in rel.parents if d.name):
            left.append(LeftOut(p, "inside Ascend profiler output with no ASCEND_PROFILER_OUTPUT/ or PROF_* data"))
            continue
        if not any(f.files is not None and f.sniff is not None and f.files.fullmatch(p.name) for f in registry.FORMATS):
            kind = "a CSV outside any profiler output directory" if p.name.endswith(".csv") else "a format not read"
            left.append(LeftOut(p, f"not a trace: {kind}"))
            continue
        unit = Source(p, detect(p))
        # JSON beside the traces that is no trace (a config.json, a metrics file) is not a unit:
        # as one it would fail, be left out, and shift the ranks of the traces after it
        if unit.format == "chrome" and _not_a_trace(p):
            left.append(LeftOut(p, 'JSON with no "traceEvents": not a trace'))
            continue
        traces.append(unit)
    if not profiler and not traces:
        raise InputError(f"{src}: no trace files (*.json, *.json.gz) and no Ascend profiler output in this directory")
    return profiler + traces, left


def _a_trace(path: Path) -> bool:
    """Whether `path` is a Chrome/Kineto trace (by name, then by its text), not side JSON."""
    names = registry.get("chrome").files
    if names is None or not names.fullmatch(path.name):
        return False
    try:
        return detect(path) == "chrome" and not _not_a_trace(path)
    except InputError:  # empty or unreadable: the claiming unit's to read, as before
        return False


def _where(units: list[Source], others: list[Source]) -> str:
    """How to import `units` alone: their common folder if it holds none of `others`, else
    their files (a few) or a glob of their folder."""
    paths = [u.path for u in units]
    common = Path(os.path.commonpath([str(p) for p in paths]))
    if len(paths) == 1:
        return str(paths[0])
    if not any(o.path.is_relative_to(common) or common.is_relative_to(o.path) for o in others):
        return str(common)
    if len(paths) <= 3:
        return " ".join(map(str, paths))
    return f"{common}/… ({len(paths)} files: name them, or move them to a folder of their own)"


def _refuse_two_families(units: list[Source], given: Sequence[Path]) -> None:
    """Ascend output and Kineto traces in one import are two jobs: refuse in one line, naming
    each and how to import it alone."""
    families: dict[str, list[Source]] = {}
    for u in units:  # a torch_npu job writes no Kineto trace, and the reverse
        families.setdefault(registry.get(u.format).family, []).append(u)
    if len(families) < 2:
        return
    ascend_units, kineto_units = families["ascend"], families["kineto"]
    where = ", ".join(map(str, given))
    raise InputError(
        f"{where}: two jobs: Ascend/MindSpore profiler output ({len(ascend_units)} unit(s)) and "
        f"{len(kineto_units)} Kineto/Chrome trace(s); import each into its own run "
        f"(prof-engine import {_where(ascend_units, kineto_units)} -o RUN1; "
        f"prof-engine import {_where(kineto_units, ascend_units)} -o RUN2), or pass --merge-unrelated "
        "to import them as one run"
    )


def _not_a_trace(path: Path) -> bool:
    """A JSON object small enough to read whole with no `traceEvents` key (`detect` says 'chrome'
    for it so that a file given by name gets the reader's precise error)."""
    with open_bytes(path) as f:
        head = f.read(1 << 16)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" and b'"traceEvents"' not in head and len(head) < (1 << 16)


def _fingerprint(path: Path, whole: bool = False) -> tuple:
    """Size and a hash of the head and tail of a file (of all of it with `whole`), to tell copies
    of one trace; a directory by its resolved path alone."""
    if path.is_dir():
        return ("dir", str(path.resolve()))
    size, h = path.stat().st_size, hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        if whole:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        else:
            h.update(f.read(1 << 16))
            f.seek(max(size - (1 << 16), 0))
            h.update(f.read(1 << 16))
    return ("file", size, h.hexdigest())


def _refuse_duplicates(units: list[Source]) -> None:
    """The same trace given twice (the same path, or a copy) would be imported as two ranks and
    double every number: refuse it. Head and tail tell copies apart at no cost; files that agree
    there are compared whole."""
    seen: dict[tuple, Path] = {}
    for u in units:
        key = _fingerprint(u.path)
        if key in seen and (key[0] == "dir" or _fingerprint(u.path, True) == _fingerprint(seen[key], True)):
            same = "the same path" if u.path.resolve() == seen[key].resolve() else "identical content"
            raise InputError(f"{seen[key]} and {u.path} are the same trace ({same}): give each rank's trace once")
        seen.setdefault(key, u.path)


def import_sources(
    sources: Sequence[Path | str],
    out: Path | str,
    *,
    force: bool = False,
    jobs: int | None = None,
    progress: Progress | None = None,
    metadata: dict[str, Any] | None = None,
    memory_limit: str | None = None,
    executor: str | None = None,
    address: str | None = None,
    merge_unrelated: bool = False,
) -> Path:
    """Import trace files or directories into the run at `out`; return its path.

    A directory with one trace per rank (Kineto files, Ascend rank directories) becomes one run
    with a rank per unit, converted in `jobs` parallel processes (default: one per core). When
    several units are imported, one that fails is left out and listed in the manifest's `skipped`
    with its error; the others still make the run. If every unit fails, the first error is raised.
    Each unit is finalised (steps, nesting, launch links) in the process that converted it, right
    after its conversion: memory is bounded per unit, whatever the number of units. `memory_limit`
    caps DuckDB's memory while a unit is finalised (e.g. "256MB"; default: from the unit's number
    of records, `prof_engine.store.builder.finalize_memory_limit`).

    `executor="ray"` imports each unit as a Ray task instead (on the cluster at `address`, else
    on Ray's running or a new local instance): the sources must be at the same path on its nodes.
    A task writes its unit's tables into the run where its node sees the run's directory, else
    sends them back; this process writes the manifest last. `executor="local"` is the pool above.

    Every file of a directory is imported or left out with its reason (the manifest's
    `left_out`, the `unread_files` rule). Sources that are not one job (Ascend output beside
    Kineto traces, different world sizes, hosts of rank-less traces, times far apart) are
    refused unless `merge_unrelated`, which imports them as one run and says so (`unrelated_sources`).
    """
    _ray.check_executor(executor, address, InputError)
    if executor == "ray" and jobs is not None:
        raise InputError("--jobs counts this machine's processes; with --executor ray, Ray schedules by its CPUs")
    if is_uri(out):
        raise InputError(
            f"{out}: runs are written to a local or shared directory; copy the run to object storage "
            "afterwards (views, export and query read it there)"
        )
    if isinstance(sources, (str, Path)):  # one source, not the characters of its path
        sources = [sources]
    units, left_out = expand_sources([Path(s) for s in sources], merge_unrelated)
    if not units:
        raise InputError("nothing to import: no trace files or profiler directories given")
    sizes = [_size(u.path) for u in units]
    total, done = sum(sizes), 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(done, total)

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(units)))
    threads = max(1, min((os.cpu_count() or 1) // jobs, FINALIZE_THREADS))  # DuckDB threads per unit's finalize
    with RunBuilder(Path(out), force=force) as builder:
        results: list[tuple[SourceFile, Finalized] | ProfEngineError]
        if executor == "ray":
            work = [(u, i, builder.unit_dir(i), memory_limit, threads) for i, u in enumerate(units)]
            results = _import_ray(builder, work, sizes, address, advance)
        else:
            groups = batches(units, sizes, jobs)
            batched = [([(units[i], i) for i in g], builder.unit_dir(g[0]), memory_limit, threads) for g in groups]
            if jobs == 1:
                outcomes = [_import_batch(*w, advance) for w in batched]
            else:
                outcomes = _import_parallel(batched, [sum(sizes[i] for i in g) for g in groups], jobs, advance)
            by_index = {i: r for g, rs in zip(groups, outcomes) for i, r in zip(g, rs)}
            results = [by_index[i] for i in range(len(units))]
        imported = [r for r in results if isinstance(r, tuple)]
        failed = [r for r in results if isinstance(r, ProfEngineError)]
        if failed and (len(units) == 1 or not imported):
            raise failed[0]
        _check_ranks([info for info, _ in imported])
        unrelated = _unrelated(imported)
        if unrelated and not merge_unrelated:
            raise InputError(
                f"not one job: {unrelated}; import each job into its own run, "
                "or pass --merge-unrelated to import them as one"
            )
        findings = _rank_findings([info for info, _ in imported])
        findings += _left_out_findings(left_out, failed, len(units), unrelated)
        formats = sorted({info.format for info, _ in imported})
        return builder.finalize(
            imported,
            "+".join(formats),
            metadata,
            skipped=[{"error": str(e)} for e in failed],
            findings=findings,
            extra={"left_out": [{"path": str(x.path), "reason": x.reason} for x in left_out[:_LEFT_OUT_KEPT]]},
        )


_LEFT_OUT_KEPT = 1000  # left-out files the manifest names; the finding counts them all
# Ranks of one job record the same steps: their spans overlap, give or take clock skew. Traces
# further apart than this and than the longer one's span are two captures, not two ranks.
_APART_NS = 60 * 10**9


def _unrelated(imported: list[tuple[SourceFile, Finalized]]) -> str:
    """Why the imported sources are not one job ('' when they may be): two source formats,
    world sizes, hosts of traces that name no rank, or spans far apart."""
    infos = [info for info, _ in imported]
    if len(infos) < 2:
        return ""
    reasons = []
    if len(formats := {i.format for i in infos}) > 1:
        reasons.append(f"formats {', '.join(sorted(formats))}")
    worlds = {
        w
        for i in infos
        if isinstance(d := i.info.get("distributedInfo"), dict)
        and isinstance(w := d.get("world_size"), int)
        and not isinstance(w, bool)
    }
    if len(worlds) > 1:
        reasons.append(f"world sizes {', '.join(map(str, sorted(worlds)))}")
    rankless = [i for i in infos if i.info.get("rank_from") == "file order"]
    if len(hosts := {i.host for i in rankless if i.host}) > 1:
        reasons.append(f"traces naming no rank from hosts {', '.join(sorted(hosts))}")
    spans = sorted(
        (done.summary["start_ns"], done.summary["end_ns"], info.path)
        for info, done in imported
        if done.summary.get("start_ns") is not None and done.summary.get("end_ns") is not None
    )
    end, longest = None, 0
    for start, stop, path in spans:
        if end is not None and start - end > max(_APART_NS, longest):
            reasons.append(f"{Path(path).name} starts {(start - end) / 1e9:,.0f} s after the traces before it end")
            break
        end, longest = stop if end is None else max(end, stop), max(longest, stop - start)
    return "; ".join(reasons)


def _left_out_findings(
    left_out: list[LeftOut], failed: list[ProfEngineError], units: int, unrelated: str
) -> list[dict[str, Any]]:
    """The run's findings of what was not imported: units that failed (`left_out_units`), files
    of the scanned directories that are no trace (`unread_files`), sources merged on request."""
    found: list[dict[str, Any]] = []
    if failed:
        found.append(
            {
                "rule": "left_out_units",
                "count": len(failed),
                "total": units,
                "detail": str(failed[0])[:300],
                "rank": None,
            }
        )
    if left_out:
        reasons: dict[str, list[LeftOut]] = {}
        for x in left_out:
            reasons.setdefault(x.reason, []).append(x)
        detail = "; ".join(f"{len(xs)} × {xs[0].reason} (e.g. {xs[0].path.name})" for xs in reasons.values())
        found.append(
            {"rule": "unread_files", "count": len(left_out), "total": None, "detail": detail[:500], "rank": None}
        )
    if unrelated:
        found.append({"rule": "unrelated_sources", "count": 1, "total": None, "detail": unrelated, "rank": None})
    return found


# Finalising a unit has a fixed cost (a DuckDB connection, its macros, every pass: ~0.2 s idle,
# seconds on a busy machine) that dwarfs a small trace's conversion: 3,000 tiny traces did not
# import in 15 minutes. Small Chrome/Kineto traces are staged apart and finalised together, a
# batch per worker at least; a batch whose finalisation fails is redone a trace at a time.
SMALL_TRACE = 4 << 20
BATCH_BYTES = 64 << 20
BATCH_FILES = 256


def batches(units: list[Source], sizes: list[int], jobs: int) -> list[list[int]]:
    """The units' indexes in finalisation batches: small traces together, any other unit alone."""
    small = [i for i, u in enumerate(units) if u.format == "chrome" and sizes[i] < SMALL_TRACE]
    per_batch = max(1, min(BATCH_FILES, -(-len(small) // jobs)))  # at least a batch per worker
    batched = set(small)
    out: list[list[int]] = [[i] for i in range(len(units)) if i not in batched]
    current: list[int] = []
    held = 0
    for i in small:
        if current and (len(current) >= per_batch or held + sizes[i] > BATCH_BYTES):
            out.append(current)
            current, held = [], 0
        current.append(i)
        held += sizes[i]
    if current:
        out.append(current)
    return out


def _import_batch(
    batch: list[tuple[Source, int]],
    unit_dir: Path,
    memory_limit: str | None,
    threads: int,
    advance: Callable[[int], None] | None = None,
) -> list[tuple[SourceFile, Finalized] | ProfEngineError]:
    """`_import_unit` over the units of a batch, finalised together in `unit_dir` (the first
    one's); their results in order, each with its own rows and summary (`_split`)."""
    if len(batch) == 1:
        return [_import_unit(batch[0][0], batch[0][1], unit_dir, memory_limit, threads, advance)]
    staged: dict[int, SourceFile] = {}
    failed: dict[int, ProfEngineError] = {}
    # the batch's sources share one staging file per table, written in line: no directory,
    # thread, writer or move per trace
    shared = StagingSink(unit_dir / "staging", threaded=False)
    try:
        for unit, index in batch:
            got = _stage_unit(unit, index, unit_dir, advance, shared=shared)
            if isinstance(got, SourceFile):
                staged[index] = got
            else:
                failed[index] = got
    finally:
        shared.close()
    infos = list(staged.values())
    if not infos:
        return [failed[i] for _, i in batch]
    try:
        done = finalize_unit(
            unit_dir,
            [(i.index, i.rank, i.offset_ns) for i in infos],
            memory_limit=memory_limit,
            threads=threads,
            label=f"{len(infos)} traces from {infos[0].path}",
        )
    except ProfEngineError:  # out of memory, say: each on its own, with its own error
        shutil.rmtree(unit_dir, ignore_errors=True)
        return [
            failed[i] if i in failed else _import_unit(u, i, unit_dir.parent / f"{i:06d}", memory_limit, threads)
            for u, i in batch
        ]
    # the run takes each source's tables from its own unit directory: the batch's is the first
    # imported source's (the first of the batch may have failed)
    if (home := unit_dir.parent / f"{infos[0].index:06d}") != unit_dir:
        unit_dir.rename(home)
    parts = _split(done, infos)
    return [failed[i] if i in failed else parts[i] for _, i in batch]


def _split(done: Finalized, infos: list[SourceFile]) -> dict[int, tuple[SourceFile, Finalized]]:
    """A batch's rows and summary per source, by its rank (the tables are partitioned by rank):
    the manifest keeps each source's rows (`restrict`), and the spans tell jobs apart (`_unrelated`);
    a source's span is what its import alone would have found (`finalize_unit`'s per rank)."""
    rank_rows, spans = done.rank_rows or {}, done.rank_spans or {}
    found = {}
    for info in infos:
        start, end = spans.get(info.rank, (None, None))
        summary = {
            "devices": [d for d in done.summary["devices"] if d["rank"] == info.rank],
            "steps": [st for st in done.summary["steps"] if st["rank"] == info.rank],
            "start_ns": start,
            "end_ns": end,
        }
        rows = {table: rank_rows.get(info.rank, {}).get(table, 0) for table in done.rows}
        found[info.index] = (info, Finalized(rows, summary))
    return found


def _stage_unit(
    unit: Source,
    index: int,
    unit_dir: Path,
    advance: Callable[[int], None] | None,
    shared: StagingSink | None = None,
) -> SourceFile | ProfEngineError:
    """Convert one unit into `unit_dir/staging`, its far-off slices dropped; on a user-facing
    error, remove what it wrote and return the error. `shared`: the sink of a batch of small
    traces: the unit's records are held until it converted whole, then written there (unless the
    outlier rule may drop some: then in files of its own, as a unit alone)."""
    sink: StagingSink | MemorySink = MemorySink() if shared is not None else StagingSink(unit_dir / "staging")
    try:
        info = _convert(unit, index, sink, advance or (lambda n: None))
        if isinstance(sink, StagingSink):
            sink.close()
        if not sink.tables:
            raise InputError(
                f"{unit.path}: no trace events: an empty profile (did the profiler's schedule reach an active step?)"
            )
        if isinstance(sink, MemorySink):
            held, span = sink.batches, sink.ts_range()
            if span is None or span[1] - span[0] <= OUTLIER_FLOOR_NS:  # no outlier (the rule's first read)
                assert shared is not None
                shared.append(held)
                return info
            sink = StagingSink(unit_dir / "staging", threaded=False)
            sink.append(held)
            sink.close()
            drop_time_outliers(unit_dir / "staging", info.info, sink.tag)
            return info
        drop_time_outliers(unit_dir / "staging", info.info)  # slices days away from the rest: dropped, said
        return info
    except BaseException as e:
        if isinstance(sink, StagingSink):
            sink.discard()
        if shared is None:
            shutil.rmtree(unit_dir, ignore_errors=True)
        return _unit_error(e, unit)


def _unit_error(e: BaseException, unit: Source) -> ProfEngineError:
    """The error a unit is left out with; anything else (a full disk, a bug) is raised."""
    if isinstance(e, ProfEngineError):
        return e
    if isinstance(e, OSError) and e.errno not in (errno.ENOSPC, errno.EDQUOT):
        # the unit's input cannot be read (permissions, an I/O error): left out as a bad unit is;
        # a full disk is no unit's fault and fails the import
        return InputError(f"{e.filename or unit.path}: cannot read: {e.strerror or e}")
    raise e


def _import_unit(
    unit: Source,
    index: int,
    unit_dir: Path,
    memory_limit: str | None,
    threads: int,
    advance: Callable[[int], None] | None = None,
) -> tuple[SourceFile, Finalized] | ProfEngineError:
    """Convert one unit into its staging files, then finalise them into its tables (see
    `store.builder`); on a user-facing error, remove what it wrote and return the error."""
    info = _stage_unit(unit, index, unit_dir, advance)
    if not isinstance(info, SourceFile):
        return info
    try:
        return info, finalize_unit(
            unit_dir,
            [(info.index, info.rank, info.offset_ns)],
            memory_limit=memory_limit,
            threads=threads,
            label=str(unit.path),
        )
    except BaseException as e:
        shutil.rmtree(unit_dir, ignore_errors=True)
        return _unit_error(e, unit)


def _import_parallel(
    work: list[tuple], sizes: list[int], jobs: int, advance: Callable[[int], None]
) -> list[list[tuple[SourceFile, Finalized] | ProfEngineError]]:
    """Import units in `jobs` processes: this one and `jobs - 1` spawned workers (no state shared
    with this process but the files). This process converts units on a thread of its own while it
    hands out the others, one batch (`_import_batch`) at a time to whichever of them is free, largest
    first: one process fewer than `jobs` workers, whose libraries alone held ~90 MB only to wait on them."""
    results: list[list[tuple[SourceFile, Finalized] | ProfEngineError] | None] = [None] * len(work)
    order = deque(sorted(range(len(work)), key=lambda i: -sizes[i]))
    with (
        ProcessPoolExecutor(
            max_workers=jobs - 1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=start_worker,
            initargs=(os.getpid(),),
        ) as pool,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="prof-engine-import") as local,
    ):
        running: dict[Future, tuple[int, bool]] = {}  # unit, and whether this process converts it
        while order or running:
            while order and not any(mine for _, mine in running.values()):
                i = order.popleft()
                running[local.submit(_import_batch, *work[i])] = (i, True)
            while order and len(running) < jobs:
                i = order.popleft()
                running[pool.submit(_import_batch, *work[i])] = (i, False)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                i, _ = running.pop(future)
                results[i] = future.result()
                advance(sizes[i])
    return results  # type: ignore[return-value]


def _import_ray(
    builder: RunBuilder, work: list[tuple], sizes: list[int], address: str | None, advance: Callable[[int], None]
) -> list[tuple[SourceFile, Finalized] | ProfEngineError]:
    """Import each unit as a Ray task, largest first (`import_unit_task`). A task that sees the
    run's directory writes its unit's tables there; one that does not returns them as bytes,
    written here as it finishes (one unit's bytes held at a time). A unit whose task died after
    Ray's retries (its worker killed: out of memory?) is left out with that error."""
    ray = _ray.connect(address)
    task = ray.remote(num_cpus=1)(import_unit_task)  # one DuckDB thread: the one CPU Ray reserves
    pending = {}
    for index in sorted(range(len(work)), key=lambda i: -sizes[i]):
        unit, unit_dir, memory_limit = work[index][0], work[index][2], work[index][3]
        pending[task.remote(unit, index, str(unit_dir), _ray.mark(unit_dir), memory_limit, 1)] = index
    results: list[tuple[SourceFile, Finalized] | ProfEngineError | None] = [None] * len(work)
    for ready, result in _ray.completed(ray, list(pending)):
        index = pending[ready]
        if isinstance(result, _ray.TaskFailed):
            result = InputError(f"{work[index][0].path}: {result}")
        elif isinstance(result, tuple) and len(result) == 3:  # written elsewhere: its files' bytes
            info, done, files = result
            for name, data in files.items():
                target = work[index][2] / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            result = info, done
        results[index] = result
        advance(sizes[index])
    return results  # type: ignore[return-value]


def import_unit_task(
    unit: Source, index: int, unit_dir: str, token: str, memory_limit: str | None, threads: int
) -> tuple[SourceFile, Finalized] | tuple[SourceFile, Finalized, dict[str, bytes]] | ProfEngineError:
    """A Ray task: `_import_unit` into the driver's `unit_dir` where this node sees it (the token
    `_ray.mark` left there), else into a directory of its own, returning its files' bytes by path."""
    if _ray.shares(unit_dir, token):
        return _import_unit(unit, index, Path(unit_dir), memory_limit, threads)
    where = Path(tempfile.mkdtemp(prefix="prof-engine-unit-"))
    try:
        result = _import_unit(unit, index, where, memory_limit, threads)
        if isinstance(result, ProfEngineError):
            return result
        files = {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file()}
        return (*result, files)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _convert(unit: Source, index: int, sink, step: Callable[[int], None]) -> SourceFile:
    try:
        return _convert_unit(unit, index, sink, step)
    except BadTime as e:  # a `ts`, `dur` or CSV time that is not a number: a corrupt source
        raise InputError(f"{unit.path}: {e} (corrupt or not a profiler's output?)") from None
    except msgspec.ValidationError as e:  # JSON no profiler writes (a number no double holds: 1e400)
        raise InputError(f"{unit.path}: {e} (corrupt or not a profiler's output?)") from None
    except UnicodeDecodeError as e:  # JSON is UTF-8; so are the profilers' CSV files
        raise InputError(
            f"{unit.path}: text that is not UTF-8 (byte {bytes(e.object[e.start : e.end]).hex(' ')}: {e.reason})"
        ) from None


def _convert_unit(unit: Source, index: int, sink, step: Callable[[int], None]) -> SourceFile:
    return registry.get(unit.format).convert(unit.path, index, sink, step)


def _rank_findings(infos: list[SourceFile]) -> list[dict[str, Any]]:
    """Where the ranks are guesses, say so: a source of several whose trace names no rank has the
    rank of its place among the sources (two unrelated captures are not a 2-rank job); a job whose
    sources name its world size but not all of its ranks has ranks missing (cluster views cover
    only those present). Returns the run's own findings; the per-source ones go to their info."""
    if len(infos) > 1:
        for i in infos:
            if i.info.get("rank_from") == "file order":
                add_finding(
                    i.info,
                    "invented_rank",
                    1,
                    f"{Path(i.path).name}: rank {i.rank} is its place among the sources (the trace names no rank)",
                    total=None,
                )
    sizes = [
        w
        for i in infos
        if isinstance(d := i.info.get("distributedInfo"), dict)
        and isinstance(w := d.get("world_size"), int)
        and not isinstance(w, bool)
        and 0 < w < 2**31
    ]
    ranks = sorted({i.rank for i in infos})
    if sizes and (world := max(sizes)) > len(ranks):
        shown = ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")
        return [
            {
                "rule": "missing_ranks",
                "count": world - len(ranks),
                "total": world,
                "detail": f"world size {world}, traces of rank(s) {shown}: cluster views cover only these",
                "rank": None,
            }
        ]
    return []


def _check_ranks(infos: list[SourceFile]) -> None:
    seen: dict[int, str] = {}
    for i in infos:
        if i.rank in seen:
            raise InputError(
                f"{i.path} and {seen[i.rank]} both hold rank {i.rank}: import one trace per rank "
                "(separate runs for separate captures)"
            )
        seen[i.rank] = i.path
