"""Scale out: import N generated rank traces and export the summary views, with one process,
`--executor local` and `--executor ray`, at growing N; then, from per-rank costs measured in the
same run, the projection for a 4,096-rank job of 500 MB traces on a 32-node cluster.

    python benchmarks/scale_out.py --ranks 64 256 1024
    python benchmarks/scale_out.py --ranks 256 --skip-import      # views only (a generated run store)
    python benchmarks/scale_out.py --fixtures ../shared/fixtures   # every fixture: same CSVs?

Each rank is a Kineto trace from `gen_kineto.py` (`--mb-per-rank`, rank i of N). Each command
runs in a process of its own while this script samples the RSS of its process tree every 50 ms
(a local Ray's processes are its children): the tree's peak sum, and its largest process's peak.
Every executor's CSVs are compared byte for byte with the one-process export's; a difference
stops the script. Import "one process" is `--jobs 1`; "local" is the default pool (`--jobs`
cores). Export "one process" is `prof-engine export RUN` (DuckDB alone, on every core).

The current numbers, and what they say: benchmarks/README.md, "Scale out".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "prof_engine"]
MB = 10**6


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def traces(folder: Path, ranks: int, mb: float) -> int:
    """N rank traces of about `mb` MB in `folder`; returns their bytes."""
    gen = _module("gen_kineto")
    folder.mkdir(parents=True)
    return sum(gen.write_trace(folder / f"rank{r}.json", mb, r, ranks, r, 2, False)["bytes"] for r in range(ranks))


def measure(args: list[str]) -> tuple[float, float, int, int]:
    """(wall s, CPU s of the waited-for tree, peak RSS of the tree summed, of its largest process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
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
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(
            f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, tree_peak, one_peak


def csvs(folder: Path) -> dict[str, bytes]:
    """The exported files by view (their names end in the export's time stamp)."""
    return {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in folder.iterdir()}


def row(ranks: int, what: str, how: str, m: tuple[float, float, int, int]) -> None:
    print(f"| {ranks} | {what} | {how} | {m[0]:.1f} | {m[2] >> 20} | {m[3] >> 20} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[64, 256, 1024], help="none: the projection only")
    parser.add_argument("--mb-per-rank", type=float, default=0.3)
    parser.add_argument("--skip-import", action="store_true", help="views only, on a generated run store")
    parser.add_argument("--nodes", type=int, default=32, help="the projection's cluster")
    parser.add_argument("--cores-per-node", type=int, default=64)
    parser.add_argument("--project-mb", type=float, default=500, help="the projection's trace size per rank")
    parser.add_argument("--project-ranks", type=int, default=4096)
    parser.add_argument("--fixtures", type=Path, help="only compare the CSVs of each fixture folder's run")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="scale-out-"))
    if opts.fixtures:
        try:
            return same_on_fixtures(opts.fixtures, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        print("| ranks | step | how | seconds | peak RSS, tree (MB) | peak RSS, largest process (MB) |")
        print("|---|---|---|---|---|---|")
        for ranks in opts.ranks:
            run = work / f"run{ranks}"
            if opts.skip_import:
                gen = _module("gen_runstore")
                gen.write(run, gen.Shape(device_records=ranks * 2000, ranks=ranks, steps=4), log=lambda *a: None)
            else:
                size = traces(work / f"traces{ranks}", ranks, opts.mb_per_rank)
                imports = {
                    "one process (--jobs 1)": ["--jobs", "1"],
                    "--executor local": ["--executor", "local"],
                    "--executor ray": ["--executor", "ray"],
                }
                for i, (how, extra) in enumerate(imports.items()):
                    out = work / f"imported{i}"
                    m = measure([*CLI, "import", str(work / f"traces{ranks}"), "-o", str(out), *extra])
                    row(ranks, f"import {size / MB:.0f} MB", how, m)
                    if how.startswith("one"):
                        out.rename(run)
                    else:
                        shutil.rmtree(out)
            exports = {
                "one process": [],
                "--executor local (default groups)": ["--executor", "local"],
                "--executor local, 32 ranks/task": ["--executor", "local", "--ranks-per-task", "32"],
                "--executor ray (default groups)": ["--executor", "ray"],
            }
            expected = None
            for how, extra in exports.items():
                out = work / "out"
                m = measure([*CLI, "export", str(run), "-o", str(out), *extra])
                got = csvs(out)
                shutil.rmtree(out)
                if expected is None:
                    expected = got
                elif got != expected:
                    raise SystemExit(
                        f"{ranks} ranks, {how}: {[v for v in expected if got.get(v) != expected[v]]} differ"
                    )
                row(ranks, f"export {len(got)} views", how + ("" if expected is got else ", CSVs identical"), m)
            shutil.rmtree(run)
        if not opts.skip_import:
            project(opts, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def same_on_fixtures(root: Path, work: Path) -> None:
    """Each fixture folder (<format>/<name>) imported, and `export` (the summary views) with
    --executor local and ray, one rank per task, compared byte for byte with a plain `export`."""
    print("| fixture | ranks | local | ray |\n|---|---|---|---|")
    for folder in sorted(p for p in root.glob("*/*") if p.is_dir()):
        run = work / folder.name
        proc = subprocess.run([*CLI, "import", str(folder), "-o", str(run)], capture_output=True, text=True)
        if proc.returncode:
            print(
                f"| {folder.parent.name}/{folder.name} | not imported: {proc.stderr.strip().splitlines()[-1][:100]}... | | |"
            )
            continue
        outputs = {}
        for how in ("plain", "local", "ray"):
            extra = [] if how == "plain" else ["--executor", how, "--ranks-per-task", "1"]
            subprocess.run([*CLI, "export", str(run), "-o", str(work / how), *extra], check=True, capture_output=True)
            outputs[how] = csvs(work / how)
            shutil.rmtree(work / how)
        same = {how: "identical" if outputs[how] == outputs["plain"] else "DIFFER" for how in ("local", "ray")}
        ranks = len(json.loads((run / "manifest.json").read_text(encoding="utf-8"))["ranks"])
        print(f"| {folder.parent.name}/{folder.name} | {ranks} | {same['local']} | {same['ray']} |", flush=True)
        shutil.rmtree(run)


def _records(run: Path) -> int:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))["tables"]["slices"]


def project(opts: argparse.Namespace, work: Path) -> None:
    """The projection, from one rank of `--project-mb` MB measured here: its import and its export
    (`--jobs 1`, and a plain export), each a process of its own. A Ray task has one CPU, so a
    task's time is taken as the CPU seconds its work took here."""
    gen = _module("gen_kineto")
    gen.write_trace(work / "big.json", opts.project_mb, 0, 2, 0, 16, False)
    imp = measure([*CLI, "import", str(work / "big.json"), "-o", str(work / "big"), "--jobs", "1"])
    (work / "big.json").unlink()
    exp = measure([*CLI, "export", str(work / "big"), "-o", str(work / "big-out")])
    records = _records(work / "big")
    cores = opts.nodes * opts.cores_per_node
    total_mb = opts.project_ranks * opts.project_mb
    waves = -(-opts.project_ranks // cores)
    per_task = min(128, -(-opts.project_ranks // cores))  # grouped.plan's default
    groups = -(-opts.project_ranks // per_task)
    print(
        f"\nProjection, {opts.project_ranks:,} ranks x {opts.project_mb:.0f} MB ({total_mb / 1e6:.1f} TB) on "
        f"{opts.nodes} nodes x {opts.cores_per_node} cores ({cores:,} Ray CPUs), from one {opts.project_mb:.0f} MB "
        f"rank measured here ({records:,} records):\n"
        f"- import: {imp[1]:.1f} CPU s and {imp[3] >> 20} MB peak RSS per rank. A task per rank, {min(cores, opts.project_ranks):,} "
        f"at once: {waves} wave(s), ~{waves * imp[1]:.0f} s of compute, a node's {opts.cores_per_node} tasks "
        f"~{opts.cores_per_node * (imp[3] >> 20) / 1024:.0f} GB. Reading {total_mb / 1e6:.1f} TB from shared storage "
        f"at 10 GB/s takes {total_mb / 1e4:.0f} s: storage, not compute, bounds it\n"
        f"- views (the summary export): {exp[1]:.1f} CPU s and {exp[3] >> 20} MB peak RSS per rank. By default "
        f"{per_task} ranks per task, {groups:,} tasks at once: ~{per_task * exp[1]:.0f} s each; the driver's "
        f"cluster views then read step_trace's ~{opts.project_ranks * 10:,} rows (a few ms)"
    )


if __name__ == "__main__":
    main()
