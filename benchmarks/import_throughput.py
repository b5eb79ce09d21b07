"""Import throughput of prof-engine against plain JSON loaders, one subprocess per contender.

    python benchmarks/import_throughput.py                      # ~100 MB synthetic Kineto trace
    python benchmarks/import_throughput.py --mb 300 --repeat 3
    python benchmarks/import_throughput.py --trace my.pt.trace.json.gz --skip json
    python benchmarks/import_throughput.py --profile            # + cProfile of prof-engine's import

Contenders (each in its own Python process, so peak RSS is that contender's alone):

* prof-engine  `prof_engine.import_trace([trace], out, force=True)`: the full import, i.e. streaming
               decode, conversion, staging Parquet, DuckDB step/nesting/link pass, final run store.
* orjson       `orjson.loads(open(trace, 'rb').read())`: parse only, everything as Python objects.
* json         `json.load(f)` from the standard library: parse only.
* duckdb       `read_json` of `traceEvents` with the core fields typed (args kept as JSON), unnested
               and counted. DuckDB cannot read a Kineto file with default settings (see `probe`).
* hta          Holistic Trace Analysis `TraceAnalysis(trace_dir=...)`, only if `hta` is installed.

Wall time is measured inside the child around the work only (interpreter start-up and library
imports excluded; `proc s` includes them); with --repeat N the best of N runs is reported.
MB/s = uncompressed trace bytes (10^6) / wall time. CPU s = user + system time of the work (DuckDB
uses both cores, so it can exceed wall; on a busy machine it is steadier than wall). Peak RSS is the
child's own `ru_maxrss`, which includes the interpreter and the imported libraries (`base RSS`
column: RSS before the work).
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import hashlib
import importlib
import importlib.util
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DUCKDB_COLUMNS = ("{traceEvents: 'STRUCT(ph VARCHAR, cat VARCHAR, name VARCHAR, pid JSON, tid JSON, "
                  "ts DOUBLE, dur DOUBLE, args JSON)[]'}")
NAMES = ("prof-engine", "orjson", "json", "duckdb", "hta")


# -- contenders: run inside the child process ------------------------------------------------------
def open_trace(path: Path):
    """The trace opened for binary reading, gunzipped if the file is gzip (by content, not name)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def run_prof_engine(trace: Path, out: Path) -> dict:
    import prof_engine

    run = prof_engine.import_trace([trace], out, force=True)
    manifest = json.loads((run / "manifest.json").read_text())
    return {"events": sum(s["events"] for s in manifest["sources"]), "rows": sum(manifest["tables"].values())}


def run_orjson(trace: Path, out: Path) -> dict:
    import orjson

    with open_trace(trace) as f:
        return {"events": len(orjson.loads(f.read())["traceEvents"])}


def run_json(trace: Path, out: Path) -> dict:
    with open_trace(trace) as f:
        return {"events": len(json.load(f)["traceEvents"])}


def run_duckdb(trace: Path, out: Path) -> dict:
    import duckdb

    sql = (f"SELECT count(*), sum(e.dur) FROM (SELECT unnest(traceEvents) AS e FROM read_json('{trace}', "
           f"maximum_object_size=2147483647, columns={DUCKDB_COLUMNS}))")
    return {"events": duckdb.sql(sql).fetchall()[0][0]}


def run_duckdb_probe(trace: Path, out: Path) -> dict:
    """Whether DuckDB reads the file with default settings (it does not: see the README)."""
    import duckdb

    sql = f"SELECT count(*) FROM (SELECT unnest(traceEvents) FROM read_json('{trace}'))"
    try:
        return {"events": duckdb.sql(sql).fetchall()[0][0]}
    except duckdb.Error as e:
        return {"events": None, "error": str(e).splitlines()[0]}


def run_hta(trace: Path, out: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis

    out.mkdir(parents=True, exist_ok=True)
    (out / trace.name).symlink_to(trace.resolve())
    analyzer = TraceAnalysis(trace_dir=str(out))
    return {"events": sum(len(df) for df in analyzer.t.traces.values())}  # rank -> DataFrame (untested here)


CONTENDERS = {
    "prof-engine": (["prof_engine"], run_prof_engine),
    "orjson": (["orjson"], run_orjson),
    "json": ([], run_json),
    "duckdb": (["duckdb"], run_duckdb),
    "probe": (["duckdb"], run_duckdb_probe),
    "hta": (["hta.trace_analysis"], run_hta),
}


def rss_mb() -> float:
    """Current resident set size of this process in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(name: str, trace: Path, out: Path) -> None:
    """Child process: import the contender's libraries, time its work, print one JSON line."""
    modules, fn = CONTENDERS[name]
    for m in modules:
        importlib.import_module(m)
    base = rss_mb()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = fn(trace, out)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    out_row = {"name": name, "wall_s": wall, "cpu_s": cpu, "peak_mb": r1.ru_maxrss / 1024, "base_mb": base}
    print(json.dumps({**out_row, **result}))


# -- profiling prof-engine's import (child process) -----------------------------------------------
def profile_child(trace: Path, out: Path, top: int) -> None:
    """Phase split (convert vs DuckDB finalize) from a plain run, then a cProfile'd run."""
    import prof_engine
    from prof_engine.store.builder import RunBuilder

    marks: dict[str, float] = {}
    finalize = RunBuilder.finalize

    def timed_finalize(self, *a, **kw):
        marks["convert_s"] = time.perf_counter() - t0
        marks["convert_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return finalize(self, *a, **kw)

    RunBuilder.finalize = timed_finalize
    t0 = time.perf_counter()
    prof_engine.import_trace([trace], out, force=True)
    total = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    RunBuilder.finalize = finalize
    print(f"phases (no profiler): total {total:.2f} s; stream+convert+stage {marks['convert_s']:.2f} s "
          f"({100 * marks['convert_s'] / total:.0f} %, peak RSS {marks['convert_peak_mb']:.0f} MB); "
          f"DuckDB finalize + publish {total - marks['convert_s']:.2f} s "
          f"({100 * (1 - marks['convert_s'] / total):.0f} %, peak RSS {peak:.0f} MB)")
    prof = cProfile.Profile()
    out = out.with_name(out.name + "-profiled")  # a new run, as in the timed runs (no old run to replace)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    prof.runcall(prof_engine.import_trace, [trace], out, force=True)
    total = time.perf_counter() - t0
    prof.dump_stats(str(out) + ".pstats")
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    for key, label in ((3, "cumulative"), (2, "self (tottime)")):
        print(f"\ntop {top} by {label} time, % of {total:.2f} s under cProfile:")
        print(f"{'%':>6} {'seconds':>8} {'calls':>9}  function")
        for func, row in sorted(stats.items(), key=lambda kv: kv[1][key], reverse=True)[:top]:
            print(f"{100 * row[key] / total:6.1f} {row[key]:8.2f} {row[1]:9d}  {func_name(func)}")


def func_name(func: tuple[str, int, str]) -> str:
    file, line, name = func
    if file == "~":
        return name
    parts = Path(file).parts
    short = "/".join(parts[parts.index("prof_engine"):]) if "prof_engine" in parts else Path(file).name
    return f"{short}:{line}({name})"


# -- the parent: prepare, run, report ---------------------------------------------------------------
def run_child(name: str, trace: Path, runs: Path, extra: list[str] | None = None) -> dict:
    """Run one contender in a fresh interpreter; its JSON line (or an error) plus process wall time."""
    out = runs / f"run-{name}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--trace", str(trace), "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd + (extra or []), capture_output=True, text=True)
    proc = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": name, "error": f"exit {p.returncode}: {tail[:200]}"}
    if name == "profile":
        return {"name": name, "text": p.stdout}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "proc_s": proc}


def run_repeated(name: str, trace: Path, runs_dir: Path, repeat: int) -> dict:
    """Best (minimum) wall time and median peak RSS over `repeat` runs, each a new process.

    The minimum is the least disturbed by other load on the machine; every run's wall is kept.
    """
    runs = [run_child(name, trace, runs_dir) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    res = dict(ok[-1])
    for k in ("wall_s", "cpu_s", "proc_s"):
        res[k] = min(r[k] for r in ok)
    for k in ("peak_mb", "base_mb"):
        res[k] = statistics.median(r[k] for r in ok)
    res["walls"] = [round(r["wall_s"], 2) for r in ok]
    res["cpus"] = [round(r["cpu_s"], 2) for r in ok]
    return res


def uncompressed_bytes(path: Path) -> int:
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as g:
        while chunk := g.read(1 << 24):
            n += len(chunk)
    return n


def prepare_trace(args: argparse.Namespace, workdir: Path) -> Path:
    """--trace, or a synthetic trace, cached in workdir by size, seed and generator version."""
    if args.trace:
        return args.trace.resolve()
    sys.path.insert(0, str(HERE))
    import gen_kineto

    version = hashlib.sha256((HERE / "gen_kineto.py").read_bytes()).hexdigest()[:8]
    path = workdir / f"kineto_{args.mb:g}mb_seed{args.seed}_{version}.json"
    if not path.exists():
        t0 = time.perf_counter()
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        st = gen_kineto.write_trace(partial, args.mb, seed=args.seed, trace_name=path.name)
        partial.rename(path)  # a half-written trace is never reused
        print(f"generated {path}: {st['bytes'] / 1e6:.1f} MB, {st['events']:,} events, {st['steps']} steps "
              f"in {time.perf_counter() - t0:.1f} s")
    return path


def machine_info() -> str:
    """One line per fact about this machine and the library versions, for the README."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    mem = next((int(ln.split()[1]) for ln in open("/proc/meminfo") if ln.startswith("MemTotal")), 0)
    versions = []
    for mod in ("prof_engine", "msgspec", "pyarrow", "duckdb", "polars", "orjson"):
        try:
            versions.append(f"{mod} {importlib.import_module(mod).__version__}")
        except (ImportError, AttributeError):
            versions.append(f"{mod} -")
    return (f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 1024 / 1024:.1f} GiB RAM; "
            f"Python {sys.version.split()[0]}; "
            f"{', '.join(versions)}; {git_state()}; {time.strftime('%Y-%m-%d')}")


def git_state() -> str:
    """The commit measured, and whether the library's files differ from it."""
    def git(*cmd: str) -> str:
        p = subprocess.run(["git", "-C", str(HERE.parent), *cmd], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", "prof_engine", "queries", "schemas")
    where = Path(importlib.import_module("prof_engine").__file__).parent.parent
    state = f"at {head}{' + uncommitted library changes' if dirty else ''}" if head else "(not a git checkout)"
    return f"prof-engine from {where} {state}"


def print_table(results: list[dict], nbytes: int) -> None:
    """Markdown table: one row per contender, ratios against prof-engine."""
    pe = next((r for r in results if r["name"] == "prof-engine" and "error" not in r), None)
    print("\n| contender | wall s | MB/s | CPU s | peak RSS MB | base RSS MB | time vs prof-engine "
          "| RSS vs prof-engine | events | proc s |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        if "error" in r or "skipped" in r:
            print(f"| {r['name']} | {r.get('skipped') or r['error']} | | | | | | | | |")
            continue
        t_ratio = f"{r['wall_s'] / pe['wall_s']:.2f}x" if pe else "-"
        m_ratio = f"{r['peak_mb'] / pe['peak_mb']:.2f}x" if pe else "-"
        events = f"{r['events']:,}" if r.get("events") is not None else "-"
        print(f"| {r['name']} | {r['wall_s']:.2f} | {nbytes / 1e6 / r['wall_s']:.1f} | {r['cpu_s']:.2f} | "
              f"{r['peak_mb']:.0f} | "
              f"{r['base_mb']:.0f} | {t_ratio} | {m_ratio} | {events} | {r['proc_s']:.2f} |")
    print(f"\ninput: {nbytes / 1e6:.1f} MB uncompressed; wall s / CPU s per run: "
          + "; ".join(f"{r['name']} {r['walls']} / {r['cpus']}" for r in results if "walls" in r))


def store_report(run: Path, events: int | None, nbytes: int) -> None:
    """Size of prof-engine's run store per trace event (apparent bytes and disk blocks)."""
    files = [p for p in run.rglob("*") if p.is_file()]
    apparent = sum(p.stat().st_size for p in files)
    disk = sum(p.stat().st_blocks * 512 for p in files)
    if not events:
        return
    print(f"run store: {apparent / 1e6:.1f} MB in {len(files)} files ({disk / 1e6:.1f} MB on disk) "
          f"for {events:,} events: "
          f"{apparent / events:.1f} B/event ({disk / events:.1f} B/event on disk), "
          f"{100 * apparent / nbytes:.1f} % of the JSON")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100, help="size of the synthetic trace (MB, uncompressed)")
    ap.add_argument("--trace", type=Path, help="use this trace instead of generating one")
    ap.add_argument("--skip", action="append", default=[], choices=NAMES, help="leave a contender out (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per contender: best wall, median peak RSS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prof-engine-bench")
    ap.add_argument("--profile", action="store_true", help="also cProfile prof-engine's import")
    ap.add_argument("--top", type=int, default=15, help="functions listed by --profile")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (workdir/runs-PID)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        profile_child(a.trace, a.out, a.top) if a.child == "profile" else child(a.child, a.trace, a.out)
        return 0
    a.workdir.mkdir(parents=True, exist_ok=True)
    trace = prepare_trace(a, a.workdir)
    runs = a.workdir / f"runs-{os.getpid()}"  # this invocation's own run directories
    nbytes = uncompressed_bytes(trace)
    print(machine_info())
    print(f"trace: {trace} ({nbytes / 1e6:.1f} MB uncompressed, {trace.stat().st_size / 1e6:.1f} MB on disk)")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    results = []
    for name in NAMES:
        if name in a.skip:
            continue
        if name == "hta" and importlib.util.find_spec("hta") is None:
            results.append({"name": name, "skipped": "not installed"})
            continue
        print(f"running {name} ...", flush=True)
        results.append(run_repeated(name, trace, runs, a.repeat))
    print_table(results, nbytes)
    print("load average (1, 5, 15 min) after: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    pe = next((r for r in results if r["name"] == "prof-engine" and "error" not in r), None)
    if pe:
        store_report(runs / "run-prof-engine", pe.get("events"), nbytes)
    if "duckdb" not in a.skip:
        probe = run_child("probe", trace, runs)
        print(f"duckdb with default read_json settings: {probe.get('error') or str(probe.get('events')) + ' events'}")
    if a.profile:
        print("\nprofiling prof-engine's import ...", flush=True)
        prof = run_child("profile", trace, runs, ["--top", str(a.top)])
        print(prof.get("text") or prof.get("error"))
    if not a.keep:
        shutil.rmtree(runs, ignore_errors=True)
    else:
        print(f"run directories kept in {runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
