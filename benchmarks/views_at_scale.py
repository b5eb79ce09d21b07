"""Views and export at scale: the issue's targets on a run of ~10 M device records, with baselines.

    python benchmarks/views_at_scale.py                          # 10 M device records (built once, cached)
    python benchmarks/views_at_scale.py --device-records 1000000 --repeat 3
    python benchmarks/views_at_scale.py --only step_trace --only overlap

The run store is written by `gen_runstore.py` (Parquet partitions through prof-engine's own writer,
no JSON import: see that file) into `--workdir`, keyed by its parameters and the generator's hash.
Every measurement is a fresh Python process (`--child NAME`) that opens the run with
`prof_engine.open` and does one thing:

* op_statistic, step_trace, overlap, api_statistic: `run.view(name).arrow()`, all rows materialised;
* op_summary: `SELECT count(*) FROM op_summary` (every device record, counted);
* kernel_launch (count and mean delay of every device task's launch), op_flops (all rows),
  key_averages (all rows), operator_details (count and summed device time of every op call),
  advice (all rows), kernel_details (count), op_memory, idle_time and queue_length (all rows),
  which have no target of their own;
* export: `prof-engine export RUN op_summary --step ... --format csv` through the CLI's typer app,
  with enough steps for ~1 M rows.

Open s is `prof_engine.open`; work s is the query or the export after it; target and met? apply to
the sum (what a user waits for). Peak RSS is the child's `ru_maxrss` (interpreter and libraries
included). Baselines do a comparable job without prof-engine, each also in a fresh process:

* polars op_statistic: `scan_parquet` of the slices, device kernels joined to their launching op by
  `launch_id`, grouped by rank, device and op type (count, sum, min, mean, max);
* polars api_statistic: API calls grouped by rank and name (sum, count, mean, min, max, variance);
* polars Computing union: the first of overlap's four lanes (sort, running max, islands) per rank,
  device and step; step_trace and overlap do this and three more passes;
* duckdb scan: `count(*), sum(dur)` over every slice (the floor of any view over them);
* duckdb COPY csv: the same ~1 M device records, raw columns, `COPY ... TO` CSV.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_S = 2.0
VIEWS = ("op_statistic", "step_trace", "overlap", "api_statistic")
# views with no target of their own, measured beside them: name -> the query
EXTRAS = {
    "kernel_launch": 'SELECT count(*), avg("Launch Delay(us)") FROM kernel_launch',
    "op_flops": "SELECT * FROM op_flops",
    "key_averages": "SELECT * FROM key_averages",
    "operator_details": 'SELECT count(*), sum("Device Total Duration(us)") FROM operator_details',
    "advice": "SELECT * FROM advice",
    "kernel_details": "SELECT count(*) FROM kernel_details",
    "op_memory": "SELECT * FROM op_memory",
    "idle_time": "SELECT * FROM idle_time",
    "queue_length": "SELECT * FROM queue_length",
}
# name -> the baseline printed beside it
BASELINE_OF = {
    "op_statistic": "polars op_statistic",
    "api_statistic": "polars api_statistic",
    "step_trace": "polars Computing union",
    "overlap": "polars Computing union",
    "op_summary count": "duckdb scan",
    "export csv": "duckdb COPY csv",
}


# -- the children: one measurement each ----------------------------------------------------------------
def export_steps(run: Path, rows: int) -> list[int]:
    """The first steps whose device records add up to about `rows` (from the manifest)."""
    manifest = json.loads((run / "manifest.json").read_text())
    per_step = manifest["metadata"]["device_records_per_step"]
    steps = sorted({s["step"] for s in manifest["steps"]})
    return steps[: max(1, round(rows / per_step))]


def measure_engine(name: str, run: Path, out: Path, export_rows: int) -> dict:
    import prof_engine

    if name == "export csv":
        from prof_engine.cli import app

        steps = export_steps(run, export_rows)
        t0 = time.perf_counter()
        app(
            [
                "export",
                str(run),
                "op_summary",
                "--format",
                "csv",
                "-o",
                str(out),
                *[a for s in steps for a in ("--step", str(s))],
            ],
            standalone_mode=False,
        )
        wall = time.perf_counter() - t0
        (csv,) = out.glob("op_summary_*.csv")
        with open(csv, "rb") as f:
            rows = sum(1 for _ in f) - 1
        return {
            "open_s": None,
            "work_s": wall,
            "rows": rows,
            "mb": csv.stat().st_size / 1e6,
            "note": f"{len(steps)} steps",
        }
    t0 = time.perf_counter()
    r = prof_engine.open(run)
    t1 = time.perf_counter()
    if name == "op_summary count":
        rows = r.sql("SELECT count(*) FROM op_summary").rows()[0][0]
    elif name in EXTRAS:
        result = r.sql(EXTRAS[name])
        rows = result.rows()[0][0] if name == "kernel_launch" else len(result)
    else:
        rows = r.view(name).arrow().num_rows
    t2 = time.perf_counter()
    r.close()
    return {"open_s": t1 - t0, "work_s": t2 - t1, "rows": rows}


def measure_baseline(name: str, run: Path, out: Path, export_rows: int) -> dict:
    slices = str(run / "slices" / "**" / "*.parquet")
    t0 = time.perf_counter()
    if name.startswith("polars"):
        import polars as pl

        s = pl.scan_parquet(slices, hive_partitioning=True)
        if name == "polars op_statistic":
            ops = s.filter(pl.col("device") == "host").select(
                pl.col("id").alias("launch_id"), pl.col("name").alias("op")
            )
            q = (
                s.filter((pl.col("device") != "host") & (pl.col("kind") == "kernel"))
                .join(ops, on="launch_id", how="left")
                .group_by("rank", "device", pl.coalesce("op_type", "op", "name").alias("op_type"))
                .agg(
                    pl.len(),
                    pl.col("dur").sum().alias("sum"),
                    pl.col("dur").min().alias("min"),
                    pl.col("dur").mean().alias("mean"),
                    pl.col("dur").max().alias("max"),
                )
            )
        elif name == "polars api_statistic":
            q = (
                s.filter(pl.col("kind") == "api")
                .group_by("rank", "name")
                .agg(
                    pl.len(),
                    pl.col("dur").sum().alias("sum"),
                    pl.col("dur").mean().alias("mean"),
                    pl.col("dur").min().alias("min"),
                    pl.col("dur").max().alias("max"),
                    pl.col("dur").var(ddof=0).alias("var"),
                )
            )
        else:  # Computing union: islands of kernels per rank, device and step
            key = ["rank", "device", "step"]
            q = (
                s.filter((pl.col("device") != "host") & (pl.col("kind") == "kernel") & (pl.col("dur") > 0))
                .select(*key, pl.col("ts").alias("s"), (pl.col("ts") + pl.col("dur")).alias("e"))
                .sort(*key, "s", "e")
                .with_columns(pl.col("e").cum_max().shift(1).over(key).alias("reach"))
                .with_columns(
                    (pl.col("reach").is_null() | (pl.col("s") > pl.col("reach"))).cum_sum().over(key).alias("island")
                )
                .group_by(*key, "island")
                .agg(pl.col("s").min(), pl.col("e").max())
            )
        rows = q.collect().height
    else:
        import duckdb

        from prof_engine.store.partitions import hive_types  # step is a directory level in runs before schema 1.1

        types = hive_types((run / "slices").rglob("*.parquet"))
        src = f"read_parquet('{slices}', hive_partitioning = true, hive_types = {types})"
        if name == "duckdb scan":
            duckdb.sql(f"SELECT count(*), sum(dur) FROM {src}").fetchall()
            rows = 1
        else:  # duckdb COPY csv
            steps = export_steps(run, export_rows)
            out.mkdir(parents=True, exist_ok=True)
            rows = duckdb.execute(
                f"COPY (SELECT * EXCLUDE (args) FROM {src} WHERE device <> 'host' AND kind IN ('kernel', 'comm', 'memcpy', 'memset') "
                f"AND step IN ({', '.join(map(str, steps))})) TO '{out / 'raw.csv'}' (HEADER)"
            ).fetchall()[0][0]
    return {"open_s": None, "work_s": time.perf_counter() - t0, "rows": rows}


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent across fork + exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))


def child(name: str, run: Path, out: Path, export_rows: int) -> None:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    fn = (
        measure_engine
        if name in VIEWS or name in EXTRAS or name in ("op_summary count", "export csv")
        else measure_baseline
    )
    res = fn(name, run, out, export_rows)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    res.update(name=name, cpu_s=(r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), peak_mb=peak_rss_mb())
    print(json.dumps(res))


# -- the parent -------------------------------------------------------------------------------------------
def prepare_run(a: argparse.Namespace) -> Path:
    """The synthetic run for these parameters, generated once into the workdir (in a process of its
    own, so that this one stays small while it starts the measured ones)."""
    # keyed by the generator and the store's writer, summary, schemas and the macros that derive the
    # stored lanes: a run written by an older writer (another layout, other encodings, a manifest
    # without what views now read) would measure that writer's files
    builder = HERE.parent / "prof_engine" / "store" / "builder.py"
    sources = [
        HERE / "gen_runstore.py",
        HERE.parent / "prof_engine" / "store" / "partitions.py",
        builder,
        *sorted((HERE.parent / "schemas").glob("*.toml")),
        *(HERE.parent / "queries" / name for name in _finalize_macros(builder)),
    ]
    version = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:8]
    path = a.workdir / f"runstore_{a.device_records}dev_{a.ranks}r_{a.steps}s_{version}"
    if not (path / "manifest.json").exists():
        print(f"generating {path} ...", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(HERE / "gen_runstore.py"),
                "-o",
                str(path),
                "--device-records",
                str(a.device_records),
                "--ranks",
                str(a.ranks),
                "--steps",
                str(a.steps),
            ],
            check=True,
        )
    return path


def _finalize_macros(builder: Path) -> list[str]:
    """builder.FINALIZE_MACROS, read from its source so that this process does not load duckdb."""
    for node in ast.parse(builder.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FINALIZE_MACROS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"{builder}: no FINALIZE_MACROS")


def run_child(name: str, run: Path, scratch: Path, export_rows: int) -> dict:
    out = scratch / name.replace(" ", "_")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--run",
        str(run),
        "--out",
        str(out),
        "--export-rows",
        str(export_rows),
    ]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    proc = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": name, "error": f"exit {p.returncode}: {tail[:200]}"}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "proc_s": proc}


def run_repeated(name: str, run: Path, scratch: Path, export_rows: int, repeat: int) -> dict:
    """Best total time of `repeat` fresh processes (least disturbed by other load); median peak RSS."""
    runs = [run_child(name, run, scratch, export_rows) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    for r in ok:
        r["total_s"] = (r["open_s"] or 0) + r["work_s"]
    best = dict(min(ok, key=lambda r: r["total_s"]))
    best["peak_mb"] = statistics.median(r["peak_mb"] for r in ok)
    best["totals"] = [round(r["total_s"], 2) for r in ok]
    return best


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "" if x is None else format(x, spec)


def print_table(results: dict[str, dict]) -> None:
    print(
        "\n| measurement | open s | work s | total s | peak RSS MB | rows | target | met? | baseline | baseline s | x baseline |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|---|---|--:|--:|")
    for name, r in results.items():
        if name not in BASELINE_OF:
            continue
        if "error" in r:
            print(f"| {name} | {r['error']} | | | | | | | | | |")
            continue
        b = results.get(BASELINE_OF[name], {})
        bs = b.get("total_s")
        ratio = f"{r['total_s'] / bs:.1f}x" if bs else ""
        rows = f"{r['rows']:,}" + (f" ({r['mb']:.0f} MB)" if r.get("mb") else "")
        print(
            f"| {name} | {fmt(r['open_s'])} | {fmt(r['work_s'])} | {r['total_s']:.2f} | {r['peak_mb']:.0f} | {rows} | "
            f"< {TARGET_S:g} s | {'yes' if r['total_s'] < TARGET_S else 'no'} | {BASELINE_OF[name]} | "
            f"{fmt(bs)} | {ratio} |"
        )
    extras = {n: r for n, r in results.items() if n in EXTRAS}
    if extras:
        print("\n| other view (no target) | open s | work s | total s | peak RSS MB | rows |")
        print("|---|--:|--:|--:|--:|--:|")
        for name, r in extras.items():
            print(
                f"| {name} | "
                + (
                    r["error"]
                    if "error" in r
                    else f"{fmt(r['open_s'])} | {fmt(r['work_s'])} | {r['total_s']:.2f} | {r['peak_mb']:.0f} | "
                    f"{r['rows']:,}"
                )
                + " |"
            )
    print("\n| baseline | s | peak RSS MB | rows |")
    print("|---|--:|--:|--:|")
    for name, r in results.items():
        if name in BASELINE_OF or name in EXTRAS:
            continue
        print(
            f"| {name} | "
            + (r["error"] if "error" in r else f"{r['total_s']:.2f} | {r['peak_mb']:.0f} | {r['rows']:,}")
            + " |"
        )
    print("\nper run, total s: " + "; ".join(f"{n} {r['totals']}" for n, r in results.items() if "totals" in r))


def machine_info(run: Path) -> str:
    import importlib

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    mem = next((int(ln.split()[1]) for ln in open("/proc/meminfo") if ln.startswith("MemTotal")), 0)
    versions = ", ".join(f"{m} {importlib.import_module(m).__version__}" for m in ("duckdb", "pyarrow", "polars"))
    where = Path(importlib.import_module("prof_engine").__file__).parent.parent  # the library measured (PYTHONPATH)
    head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(where), "status", "--porcelain", "--", "prof_engine", "queries"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    m = json.loads((run / "manifest.json").read_text())
    files = sum(1 for _ in run.rglob("*.parquet"))
    size = sum(p.stat().st_size for p in run.rglob("*.parquet"))
    return (
        f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 2**20:.1f} GiB RAM; Python {sys.version.split()[0]}; {versions}; "
        f"prof-engine from {where} at {head.stdout.strip() or '?'}{' + uncommitted changes' if dirty else ''}; "
        f"{time.strftime('%Y-%m-%d')}\n"
        f"run: {run}: {m['tables']} rows, {len(m['ranks'])} ranks, {len({s['step'] for s in m['steps']})} steps, "
        f"{files} files, {size / 1e6:.0f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device-records", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--export-rows", type=int, default=1_000_000, help="rows of the CSV export (whole steps)")
    ap.add_argument("--repeat", type=int, default=1, help="processes per measurement: best total, median RSS")
    ap.add_argument("--only", action="append", default=[], help="run only these measurements (repeatable)")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prof-engine-bench")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.run, a.out, a.export_rows)
        return 0
    a.workdir.mkdir(parents=True, exist_ok=True)
    run = prepare_run(a)
    print(machine_info(run))
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    names = [*VIEWS, "op_summary count", "export csv", *EXTRAS]
    if not a.no_baselines:
        names += sorted(set(BASELINE_OF.values()))
    names = [n for n in names if not a.only or n in a.only]
    scratch = Path(tempfile.mkdtemp(prefix="views-at-scale-", dir=a.workdir))
    results = {}
    for name in names:
        print(f"running {name} ...", flush=True)
        results[name] = run_repeated(name, run, scratch, a.export_rows, a.repeat)
    shutil.rmtree(scratch, ignore_errors=True)
    print_table(results)
    print("load average (1, 5, 15 min) after: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
