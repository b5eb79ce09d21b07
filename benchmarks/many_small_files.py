"""Many small traces against one trace of the same total size: import time per MB, side by side.

    python benchmarks/many_small_files.py                      # 100 traces of ~0.11 MB vs one of ~11 MB
    python benchmarks/many_small_files.py --files 1000 --mb 0.11 --repeat 3 --jobs 2

Both sides are synthetic Kineto traces of `gen_kineto.py` with one conv block per step (a few
hundred events per small trace), generated once into the work directory (cached by the
arguments and a hash of `gen_kineto.py`). Each import is `prof-engine import DIR -o RUN --jobs J`
in a process of its own (the console script, as a user runs it), so interpreter start-up and
library imports count alike on both sides. Wall time is the child's; CPU s its user + system time
(steadier than wall on a busy machine). With --repeat N the best of N runs is kept. The ratio is
(small traces' s/MB) / (large trace's s/MB), for wall and CPU: 1.0 means a folder of small traces
imports as fast per MB as one large trace.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_kineto import write_trace  # noqa: E402


def _generate(work: Path, files: int, mb: float) -> tuple[Path, Path, int, int]:
    """(folder of `files` traces, folder of one trace, their bytes, its bytes), cached in `work`."""
    digest = hashlib.sha1((HERE / "gen_kineto.py").read_bytes()).hexdigest()[:8]
    root = work / f"small{files}x{mb}-{digest}"
    small, large = root / "small", root / "large"
    if not (root / "done").exists():
        shutil.rmtree(root, ignore_errors=True)
        total = sum(write_trace(small / f"rank{r}.json", mb, r, files, blocks=1)["bytes"] for r in range(files))
        write_trace(large / "rank0.json", total / 1e6, 0, 1, blocks=1)
        (root / "done").touch()
    size = lambda d: sum(p.stat().st_size for p in d.iterdir())  # noqa: E731
    return small, large, size(small), size(large)


def _import(src: Path, out: Path, jobs: int) -> tuple[float, float]:
    """(wall s, CPU s) of one `prof-engine import` in a child process."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "prof_engine", "import", str(src), "-o", str(out), "--jobs", str(jobs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shutil.rmtree(out, ignore_errors=True)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100, help="small traces (default 100)")
    ap.add_argument("--mb", type=float, default=0.1, help="size of each small trace in MB (default 0.1: ~0.11)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prof-engine-bench")
    a = ap.parse_args(argv)
    small, large, small_bytes, large_bytes = _generate(a.workdir, a.files, a.mb)
    rows = []
    for name, src, size in ((f"{a.files} small traces", small, small_bytes), ("1 large trace", large, large_bytes)):
        runs = [_import(src, a.workdir / "run", a.jobs) for _ in range(a.repeat)]
        wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        rows.append((name, size / 1e6, wall, cpu))
    print(f"prof-engine import --jobs {a.jobs}, best of {a.repeat}, {os.cpu_count()} cores")
    print(f"{'input':<22}{'MB':>8}{'wall s':>9}{'CPU s':>8}{'MB/s':>8}{'s/MB':>8}{'CPU s/MB':>10}")
    for name, mb, wall, cpu in rows:
        print(f"{name:<22}{mb:>8.2f}{wall:>9.2f}{cpu:>8.2f}{mb / wall:>8.2f}{wall / mb:>8.3f}{cpu / mb:>10.3f}")
    (_, smb, sw, sc), (_, lmb, lw, lc) = rows
    print(f"ratio small/large per MB: wall {(sw / smb) / (lw / lmb):.2f}x, CPU {(sc / smb) / (lc / lmb):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
