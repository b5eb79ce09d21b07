"""Cluster import: N rank files into one run, with 1..J parallel processes (`--jobs`).

    python benchmarks/cluster_import.py                       # 8 ranks × 50 MB, jobs 1 and 2
    python benchmarks/cluster_import.py --ranks 64 --mb 50    # the issue's 64 × 50 MB (3.2 GB)
    python benchmarks/cluster_import.py --ranks 16 --jobs 1 --jobs 2 --jobs 4

Rank files come from `gen_kineto.py` (`--rank i --world-size N`), cached in the work directory.
Each configuration runs `prof_engine.import_trace(files, out, jobs=J)` in a fresh process, while
this script samples the whole process tree (the import and its worker processes) every 50 ms:

* wall s and MB/s (all ranks' uncompressed bytes / wall);
* CPU s: user + system of the process and its workers;
* peak tree RSS: the largest sum of RSS over the tree seen at one sample. An upper bound: each
  process's RSS counts the pages of the libraries it maps (libarrow, DuckDB: ~60 MB once a unit
  ran), which the page cache holds once for all of them;
* peak tree PSS: the same sum of PSS (proportional set size: a page shared by n processes counts
  1/n in each), i.e. what the machine had to hold for the tree;
* peak worker RSS: the largest RSS of one worker process;
* bound: what the issue allows, jobs × the per-file bound max(300 MB, 0.5 × file size).

Also prints the run store's size and bytes per event.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
MB = 10**6


def generate(workdir: Path, ranks: int, mb: int, gen_jobs: int) -> list[Path]:
    """The N rank files, generated once (cached by size, rank count and the generator's text)."""
    tag = f"{ranks}x{mb}mb-{hashlib.sha256((HERE / 'gen_kineto.py').read_bytes()).hexdigest()[:8]}"
    folder = workdir / f"cluster-{tag}"
    files = [folder / f"rank{r}.pt.trace.json" for r in range(ranks)]
    missing = [r for r, f in enumerate(files) if not f.exists()]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"generating {len(missing)} rank files of {mb} MB in {folder} ...", flush=True)

        def one(r: int) -> None:
            tmp = files[r].with_suffix(".tmp")
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "gen_kineto.py"),
                    "--mb",
                    str(mb),
                    "-o",
                    str(tmp),
                    "--rank",
                    str(r),
                    "--world-size",
                    str(ranks),
                    "--seed",
                    str(r),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            tmp.rename(files[r])

        with ThreadPoolExecutor(gen_jobs) as pool:
            list(pool.map(one, missing))
    return files


CHILD = """
import json, resource, sys, time
import prof_engine
files, out, jobs = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
run = prof_engine.import_trace(files, out, force=True, jobs=jobs)
wall = time.perf_counter() - t
self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
m = json.loads((run / "manifest.json").read_text())
print(json.dumps({"wall": wall, "cpu": self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime,
                  "self_rss": self_.ru_maxrss * 1024, "events": sum(s["events"] for s in m["sources"]),
                  "rows": sum(m["tables"].values()), "ranks": len(m["sources"]), "skipped": m.get("skipped", [])}))
"""


def measure(files: list[Path], out: Path, jobs: int) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps([str(f) for f in files]), str(out), str(jobs)],
        stdout=subprocess.PIPE,
        text=True,
    )
    root = psutil.Process(proc.pid)
    peak_tree = peak_pss = peak_worker = 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            rss, pss = [], []
            for p in tree:
                try:
                    rss.append(p.memory_info().rss)
                    pss.append(pss_bytes(p.pid))
                except (psutil.Error, OSError):
                    rss.append(0)
                    pss.append(0)
            peak_tree = max(peak_tree, sum(rss))
            peak_pss = max(peak_pss, sum(pss))
            peak_worker = max([peak_worker, *rss[1:]])
        except psutil.Error:
            pass
        time.sleep(0.05)
    result = json.loads(proc.stdout.read().strip().splitlines()[-1])
    if proc.returncode:
        raise SystemExit(f"import with --jobs {jobs} failed (exit {proc.returncode})")
    size = sum(f.stat().st_size for f in out.rglob("*.parquet"))
    return {
        **result,
        "peak_tree": max(peak_tree, result["self_rss"]),
        "peak_pss": peak_pss,
        "peak_worker": peak_worker,
        "store": size,
    }


def pss_bytes(pid: int) -> int:
    """The process's proportional set size (Linux `smaps_rollup`)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb", type=int, default=50, help="uncompressed MB per rank file")
    ap.add_argument("--jobs", type=int, action="append", help="repeatable (default: 1 and the core count)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prof-engine-bench")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    jobs_list = args.jobs or sorted({1, cores})
    files = generate(args.workdir, args.ranks, args.mb, cores)
    total = sum(f.stat().st_size for f in files)
    per_file_bound = max(300 * MB, 0.5 * total / len(files))
    print(
        f"{len(files)} rank files, {total / MB:,.0f} MB uncompressed; {cores} cores; "
        f"per-file memory bound {per_file_bound / MB:,.0f} MB"
    )
    rows = []
    base = None
    for jobs in jobs_list:
        out = args.workdir / f"cluster-run-j{jobs}"
        r = measure(files, out, jobs)
        base = base or r["wall"]
        bound = min(jobs, len(files)) * per_file_bound
        rows.append(
            (
                jobs,
                r["wall"],
                total / MB / r["wall"],
                base / r["wall"],
                r["cpu"],
                r["peak_tree"] / MB,
                r["peak_pss"] / MB,
                r["peak_worker"] / MB,
                bound / MB,
                r["peak_tree"] <= bound,
                r["peak_pss"] <= bound,
                r["store"] / r["events"],
            )
        )
        print(
            f"  jobs {jobs}: {r['wall']:.1f} s, {r['ranks']} ranks, {r['events']:,} events, "
            f"skipped {r['skipped'] or 'none'}",
            flush=True,
        )
        if not args.keep:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
    print()
    print(
        "| jobs | wall s | MB/s | speed-up | CPU s | peak tree RSS MB | peak tree PSS MB | peak worker RSS MB | bound MB "
        "| within bound (RSS / PSS) | store B/event |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|--:|")
    for j, wall, mbs, up, cpu, tree, pss, worker, bound, ok, ok_pss, bpe in rows:
        print(
            f"| {j} | {wall:.1f} | {mbs:.1f} | {up:.2f}x | {cpu:.1f} | {tree:,.0f} | {pss:,.0f} | {worker:,.0f} | "
            f"{bound:,.0f} | {'yes' if ok else 'NO'} / {'yes' if ok_pss else 'NO'} | {bpe:.1f} |"
        )


if __name__ == "__main__":
    main()
