"""Time `prof-engine export` of op_summary, step_trace and cluster_step_trace on generated runs of
many ranks: DuckDB alone, `--executor local` and `--executor ray` (engine.grouped), and the local
executor at 32, 64 and 128 ranks per task. Peak RSS is sampled every 50 ms over the command's
process tree (a local Ray's processes are its children): the tree's sum, and its largest process.

    python benchmarks/scale_out.py --ranks 64 256 --records-per-rank 2000

On this project's 2-core machine, shared with other jobs (load ~4: timings vary by up to 2x between
passes), 2,000 device records per rank, 4 steps (`python benchmarks/scale_out.py`):

| ranks | how | seconds | peak RSS, tree (MB) | peak RSS, largest process (MB) |
|---|---|---|---|---|
| 64 | DuckDB alone | 4.4 | 248 | 248 |
| 64 | --executor local (128 ranks/task) | 4.6 | 354 | 236 |
| 64 | --executor local, 64 ranks/task | 3.3 | 354 | 237 |
| 64 | --executor local, 32 ranks/task | 7.0 | 456 | 188 |
| 64 | --executor ray (128 ranks/task) | 25.2 | 1043 | 311 |
| 256 | DuckDB alone | 6.9 | 493 | 493 |
| 256 | --executor local (128 ranks/task) | 11.3 | 767 | 326 |
| 256 | --executor local, 64 ranks/task | 11.0 | 615 | 273 |
| 256 | --executor local, 32 ranks/task | 11.0 | 488 | 301 |
| 256 | --executor ray (128 ranks/task) | 20.0 | 1248 | 394 |

(An earlier pass at 256 ranks: 128 ranks/task 11.0 s, 64: 18.8 s, 32: 19.4 s, DuckDB alone 6.4 s.)
On two cores DuckDB alone already uses both, so groups add their fixed costs (a spawned worker
~1 s, each task's open ~0.4 s, Ray's start ~3 s and its own processes' ~600 MB) and gain no
cores: what they bound here is the largest process (326 vs 493 MB at 256 ranks, and it stays
flat as ranks grow), and on a cluster the cores and memory of many machines.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
VIEWS = ("op_summary", "step_trace", "cluster_step_trace")


def generate(out: Path, ranks: int, records_per_rank: int) -> None:
    spec = importlib.util.spec_from_file_location("gen_runstore", HERE / "gen_runstore.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    gen.write(out, gen.Shape(device_records=ranks * records_per_rank, ranks=ranks, steps=4), log=lambda *a: None)


def measure(args: list[str]) -> tuple[float, int, int]:
    """(seconds, peak RSS of the process tree summed, peak RSS of its largest process) of a command."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    tree_peak = one_peak = 0
    while proc.poll() is None:
        try:
            rss = [p.memory_info().rss for p in (root, *root.children(recursive=True))]
        except psutil.Error:
            rss = []
        if rss:
            tree_peak, one_peak = max(tree_peak, sum(rss)), max(one_peak, max(rss))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(
            f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return seconds, tree_peak, one_peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--records-per-rank", type=int, default=2000)
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="scale-out-"))
    cli = [sys.executable, "-m", "prof_engine", "export"]
    try:
        print("| ranks | how | seconds | peak RSS, tree (MB) | peak RSS, largest process (MB) |")
        print("|---|---|---|---|---|")
        for ranks in opts.ranks:
            run = work / f"run{ranks}"
            generate(run, ranks, opts.records_per_rank)
            cases = {
                "DuckDB alone": [],
                "--executor local (128 ranks/task)": ["--executor", "local"],
                "--executor local, 64 ranks/task": ["--executor", "local", "--ranks-per-task", "64"],
                "--executor local, 32 ranks/task": ["--executor", "local", "--ranks-per-task", "32"],
                "--executor ray (128 ranks/task)": ["--executor", "ray"],
            }
            for how, extra in cases.items():
                out = work / "out"
                seconds, tree, one = measure([*cli, str(run), *VIEWS, "-o", str(out), *extra])
                shutil.rmtree(out, ignore_errors=True)
                print(f"| {ranks} | {how} | {seconds:.1f} | {tree >> 20} | {one >> 20} |", flush=True)
            shutil.rmtree(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
