"""`Profiler.offline_analyse(path)`: one run of many, after the fact, in parallel.

`path` may hold the runs the collector wrote for the ranks of a job (`<output>/rank<N>/`, or any
collector runs below it): they are merged into one run with a rank each, one process per rank
run, through the same finalisation as an import. Anything else under `path` (Kineto traces,
Ascend profiler directories) is what `prof-engine import` reads, and is imported as it would.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from prof_engine._process import start_worker
from prof_engine.errors import InputError
from prof_engine.importers.runstore import COLLECTOR_FORMAT, is_collector_run, stage_run
from prof_engine.store.builder import Finalized, RunBuilder, SourceFile, finalize_unit


def collector_runs(path: Path) -> list[Path]:
    """The collector runs at or below `path`, in path order."""
    if is_collector_run(path):
        return [path]
    return sorted(p.parent for p in path.rglob("manifest.json") if is_collector_run(p.parent))


def offline_analyse(
    path: str | os.PathLike, output: str | os.PathLike | None = None, *, jobs: int | None = None, force: bool = False
) -> Path:
    """Merge the collector runs under `path` (or import what else it holds) into the run `output`
    (default: `<path>_run`, beside it); return its path."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    out = Path(output) if output is not None else path.with_name(path.name + "_run")
    runs = collector_runs(path) if path.is_dir() else []
    if not runs:
        from prof_engine.vendor_check import import_trace  # what it holds is imported as `import` does

        return import_trace([path], out, force=force, jobs=jobs)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(runs)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with RunBuilder(out, force=force) as builder:
        work = [(r, i, builder.unit_dir(i), threads) for i, r in enumerate(runs)]
        if jobs == 1:
            units = [_merge_unit(*w) for w in work]
        else:
            with ProcessPoolExecutor(
                jobs, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker, initargs=(os.getpid(),)
            ) as pool:
                units = list(pool.map(_merge_unit, *zip(*work)))
        _check_ranks([info for info, _ in units])
        return builder.finalize(units, COLLECTOR_FORMAT, {"merged_from": [str(r) for r in runs]})


def _merge_unit(run: Path, index: int, unit_dir: Path, threads: int) -> tuple[SourceFile, Finalized]:
    """Stage the collector run `run` as unit `index` and finalise it (in a worker process)."""
    info = stage_run(run, index, unit_dir / "staging")
    return info, finalize_unit(unit_dir, [(info.index, info.rank, info.offset_ns)], threads=threads, label=str(run))


def _check_ranks(infos: list[SourceFile]) -> None:
    seen: dict[int, str] = {}
    for info in infos:
        if info.rank in seen:
            raise InputError(
                f"{info.path} and {seen[info.rank]} both hold rank {info.rank}: "
                "merge the runs of one job (one run per rank)"
            )
        seen[info.rank] = info.path
