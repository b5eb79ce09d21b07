"""Import throughput of prof-engine against plain JSON loaders, one subprocess per contender.

    python benchmarks/import_throughput.py                      # ~100 MB synthetic Kineto trace
    python benchmarks/import_throughput.py --mb 300 --repeat 3
    python benchmarks/import_throughput.py --trace my.pt.trace.json.gz --skip json
    python benchmarks/import_throughput.py --profile            # + cProfile of prof-engine's import

Contenders (each in its own Python process, so peak RSS is that contender's alone):

* prof-engine  `prof_engine.import_trace([trace], out, force=True)`: the full import, i.e. streaming
               decode, conversion, staging Parquet, DuckDB step/nesting/link pass, final run store.
* prof-engine CLI  `prof-engine import TRACE -o OUT --force` (its typer app, in the child): the same
               import, in a process tuned as the console script tunes its own (jemalloc, glibc's
               heaps, no pandas: `prof_engine._process.tune_owned_process`), plus the summary line
               it prints. The library call tunes nothing: the caller's process is theirs.
* orjson       `orjson.loads(open(trace, 'rb').read())`: parse only, everything as Python objects.
* json         `json.load(f)` from the standard library: parse only.
* duckdb       `read_json` of `traceEvents` with the core fields typed (args kept as JSON), unnested
               and counted. DuckDB cannot read a Kineto file with default settings (see `probe`).
* hta          Holistic Trace Analysis `TraceAnalysis(trace_dir=...)`: parse every rank's trace into a
               pandas DataFrame (its default `json` backend). It runs under the interpreter given by
               --hta-python, else this one if `hta` imports here, else $PROF_ENGINE_HTA_PYTHON (HTA
               lives in a virtualenv of its own: see the README). --trace may be a directory of ranks.

Wall time is measured inside the child around the work only (interpreter start-up and library
imports excluded; `proc s` includes them); with --repeat N the best of N runs is reported.
MB/s = uncompressed trace bytes (10^6) / wall time. CPU s = user + system time of the work (DuckDB
uses both cores, so it can exceed wall; on a busy machine it is steadier than wall). Peak RSS is the
child's own `ru_maxrss`, which includes the interpreter and the imported libraries (`base RSS`
column: RSS before the work). A contender that forks worker processes (HTA does for 2+ ranks) also
gets their CPU (RUSAGE_CHILDREN) in CPU s, and its peak RSS is the larger of its own `ru_maxrss`
and the peak of the summed RSS of it and its descendants, sampled every 50 ms from the first fork.
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
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DUCKDB_COLUMNS = (
    "{traceEvents: 'STRUCT(ph VARCHAR, cat VARCHAR, name VARCHAR, pid JSON, tid JSON, "
    "ts DOUBLE, dur DOUBLE, args JSON)[]'}"
)
NAMES = ("prof-engine", "prof-engine CLI", "orjson", "json", "duckdb", "hta")


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


def run_prof_engine_cli(trace: Path, out: Path) -> dict:
    from prof_engine.cli import app

    app(["import", str(trace), "-o", str(out), "--force"], standalone_mode=False)
    manifest = json.loads((out / "manifest.json").read_text())
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

    sql = (
        f"SELECT count(*), sum(e.dur) FROM (SELECT unnest(traceEvents) AS e FROM read_json('{trace}', "
        f"maximum_object_size=2147483647, columns={DUCKDB_COLUMNS}))"
    )
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
    """HTA's load of a directory of rank traces; a single file is linked into a directory of its own.

    HTA finds the ranks by `"rank": N` (distributedInfo) in each file and only takes names that end
    in `.json` or `.gz`. With one rank it parses in this process; with more it forks a pool of
    min(cpu_count, ranks) workers. What it kept is counted after the timing (see `hta_report`).
    """
    from hta.trace_analysis import TraceAnalysis

    if trace.is_dir():
        trace_dir = trace
    else:
        out.mkdir(parents=True, exist_ok=True)
        with open(trace, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        name = trace.name if trace.name.endswith(".gz" if gz else ".json") else f"rank.json{'.gz' if gz else ''}"
        (out / name).symlink_to(trace.resolve())
        trace_dir = out
    analyzer = TraceAnalysis(trace_dir=str(trace_dir))
    return {"events": sum(len(df) for df in analyzer.t.traces.values()), "after": lambda: hta_report(analyzer)}


def hta_report(analyzer) -> dict:
    """What HTA holds after the load: ranks, rows per category, iterations, versions, parser backend."""
    from importlib.metadata import version

    from hta.common.trace_parser import get_default_trace_parsing_backend

    t = analyzer.t
    names = {i: s for s, i in t.symbol_table.get_sym_id_map().items()}
    cats: dict[str, int] = {}
    for df in t.traces.values():
        for cat, n in df["cat"].value_counts().items():
            cats[names.get(cat, str(cat))] = cats.get(names.get(cat, str(cat)), 0) + int(n)
    backend = t.parser_config.parser_backend or get_default_trace_parsing_backend()
    return {
        "hta": {
            "version": version("HolisticTraceAnalysis"),
            "pandas": version("pandas"),
            "python": sys.version.split()[0],
            "interpreter": sys.executable,
            "backend": getattr(backend, "value", str(backend)),
            "ranks": t.get_ranks(),
            "iterations": len(t.get_iterations()),
            "rows_by_cat": cats,
            "columns": len(next(iter(t.traces.values())).columns) if t.traces else 0,
        }
    }


CONTENDERS = {
    # `import prof_engine` is lazy: the modules an import runs (pyarrow, DuckDB, the importers) are
    # the libraries to load before the clock starts, as hta's and the CLI's are
    "prof-engine": (["prof_engine", "prof_engine.importers", "prof_engine.store.builder"], run_prof_engine),
    "prof-engine CLI": (["prof_engine.cli"], run_prof_engine_cli),
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


class TreeRss:
    """Peak summed RSS of this process and its descendants, sampled every `interval` s once it forks.

    Until the first fork (Python's os.fork, as multiprocessing's "fork" pools use) the thread only
    waits, so a contender that never forks pays nothing. Forked children share copy-on-write pages
    with the parent, so the sum can count a page more than once: it is an upper bound.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval, self.peak_mb, self.children = interval, 0.0, 0
        self._forked, self._stop = threading.Event(), threading.Event()
        os.register_at_fork(after_in_parent=self._forked.set)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._forked.wait()
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        stats = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                except OSError:  # the process ended meanwhile
                    continue
                stats[int(entry.name)] = (int(fields[1]), int(fields[21]) * page)  # ppid, rss
        tree, todo = set(), [os.getpid()]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo.extend(p for p, (ppid, _) in stats.items() if ppid == pid and p not in tree)
        self.children = max(self.children, len(tree) - 1)
        self.peak_mb = max(self.peak_mb, sum(stats[p][1] for p in tree if p in stats) / 2**20)

    def stop(self) -> None:
        self._stop.set()
        self._forked.set()
        self._thread.join()


def child(name: str, trace: Path, out: Path) -> None:
    """Child process: import the contender's libraries, time its work, print one JSON line."""
    modules, fn = CONTENDERS[name]
    if name == "prof-engine CLI":  # as the console script does, before its modules load pyarrow
        from prof_engine._entry import tune

        tune(["import"])
    for m in modules:
        importlib.import_module(m)
    base = rss_mb()
    tree = TreeRss()
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    result = fn(trace, out)
    wall = time.perf_counter() - t0
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    tree.stop()
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    child_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)  # forked workers, once reaped
    out_row = {
        "name": name,
        "wall_s": wall,
        "cpu_s": cpu + child_cpu,
        "peak_mb": max(r1.ru_maxrss / 1024, tree.peak_mb),
        "base_mb": base,
        "self_peak_mb": r1.ru_maxrss / 1024,
        "children": tree.children,
        "children_cpu_s": child_cpu,
        "children_peak_mb": c1.ru_maxrss / 1024,
    }
    after = result.pop("after", None)
    print(json.dumps({**out_row, **result, **(after() if after else {})}))


# -- profiling prof-engine's import (child process) -----------------------------------------------
def profile_child(trace: Path, out: Path, top: int) -> None:
    """Phase split (convert vs DuckDB finalize) from a plain run, then a cProfile'd run."""
    import prof_engine
    from prof_engine import importers

    marks: dict[str, float] = {}
    finalize = importers.finalize_unit

    def timed_finalize(*a, **kw):
        marks["convert_s"] = time.perf_counter() - t0
        marks["convert_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return finalize(*a, **kw)

    importers.finalize_unit = timed_finalize  # the one unit's conversion ends where its finalize starts
    t0 = time.perf_counter()
    prof_engine.import_trace([trace], out, force=True)
    total = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    importers.finalize_unit = finalize
    print(
        f"phases (no profiler): total {total:.2f} s; stream+convert+stage {marks['convert_s']:.2f} s "
        f"({100 * marks['convert_s'] / total:.0f} %, peak RSS {marks['convert_peak_mb']:.0f} MB); "
        f"DuckDB finalize + publish {total - marks['convert_s']:.2f} s "
        f"({100 * (1 - marks['convert_s'] / total):.0f} %, peak RSS {peak:.0f} MB)"
    )
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
    short = "/".join(parts[parts.index("prof_engine") :]) if "prof_engine" in parts else Path(file).name
    return f"{short}:{line}({name})"


# -- the parent: prepare, run, report ---------------------------------------------------------------
def run_child(name: str, trace: Path, runs: Path, extra: list[str] | None = None, python: str | None = None) -> dict:
    """Run one contender in a fresh interpreter (`python`, default this one); its JSON line (or an
    error) plus process wall time."""
    out = runs / f"run-{name.replace(' ', '-')}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        python or sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--trace",
        str(trace),
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    p = subprocess.run(cmd + (extra or []), capture_output=True, text=True)
    proc = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": name, "error": f"exit {p.returncode}: {tail[:200]}"}
    if name == "profile":
        return {"name": name, "text": p.stdout}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "proc_s": proc}


def run_repeated(name: str, trace: Path, runs_dir: Path, repeat: int, python: str | None = None) -> dict:
    """Best (minimum) wall time and median peak RSS over `repeat` runs, each a new process.

    The minimum is the least disturbed by other load on the machine; every run's wall is kept.
    """
    runs = [run_child(name, trace, runs_dir, python=python) for _ in range(repeat)]
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


def hta_python(option: str | None) -> tuple[str | None, str]:
    """The interpreter that runs the `hta` contender, or None and why not.

    --hta-python if given; else this interpreter if `hta` imports here; else $PROF_ENGINE_HTA_PYTHON.
    """
    env = os.environ.get("PROF_ENGINE_HTA_PYTHON")
    if option:
        candidates = [option]
    elif importlib.util.find_spec("hta") is not None:
        return sys.executable, ""
    elif env:
        candidates = [env]
    else:
        return None, "not installed (see --hta-python)"
    py = candidates[0]
    check = "import importlib.util, sys; sys.exit(importlib.util.find_spec('hta') is None)"
    try:
        ok = subprocess.run([py, "-c", check], capture_output=True, check=False).returncode == 0
    except OSError as e:
        return None, f"cannot run {py}: {e.strerror}"
    return (py, "") if ok else (None, f"hta not importable under {py}")


def uncompressed_bytes(path: Path) -> int:
    if path.is_dir():  # a directory of rank traces (HTA only)
        return sum(uncompressed_bytes(p) for p in sorted(path.iterdir()) if p.name.endswith((".json", ".gz")))
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as g:
        while chunk := g.read(1 << 24):
            n += len(chunk)
    return n


def disk_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir() if p.name.endswith((".json", ".gz")))
    return path.stat().st_size


def prepare_trace(args: argparse.Namespace, workdir: Path) -> Path:
    """--trace, or a synthetic trace, cached in workdir by size, seed and generator version."""
    if args.trace:
        return args.trace.resolve()
    sys.path.insert(0, str(HERE))
    import gen_kineto

    version = hashlib.sha256((HERE / "gen_kineto.py").read_bytes()).hexdigest()[:8]
    blocks = "" if args.blocks == 16 else f"_blocks{args.blocks}"
    path = workdir / f"kineto_{args.mb:g}mb_seed{args.seed}{blocks}_{version}.json"
    if not path.exists():
        t0 = time.perf_counter()
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        st = gen_kineto.write_trace(partial, args.mb, seed=args.seed, blocks=args.blocks, trace_name=path.name)
        partial.rename(path)  # a half-written trace is never reused
        print(
            f"generated {path}: {st['bytes'] / 1e6:.1f} MB, {st['events']:,} events, {st['steps']} steps "
            f"in {time.perf_counter() - t0:.1f} s"
        )
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
    return (
        f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 1024 / 1024:.1f} GiB RAM; "
        f"Python {sys.version.split()[0]}; "
        f"{', '.join(versions)}; {git_state()}; {time.strftime('%Y-%m-%d')}"
    )


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
    print(
        "\n| contender | wall s | MB/s | CPU s | peak RSS MB | base RSS MB | time vs prof-engine "
        "| RSS vs prof-engine | events | proc s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        if "error" in r or "skipped" in r:
            print(f"| {r['name']} | {r.get('skipped') or r['error']} | | | | | | | | |")
            continue
        t_ratio = f"{r['wall_s'] / pe['wall_s']:.2f}x" if pe else "-"
        m_ratio = f"{r['peak_mb'] / pe['peak_mb']:.2f}x" if pe else "-"
        events = f"{r['events']:,}" if r.get("events") is not None else "-"
        print(
            f"| {r['name']} | {r['wall_s']:.2f} | {nbytes / 1e6 / r['wall_s']:.1f} | {r['cpu_s']:.2f} | "
            f"{r['peak_mb']:.0f} | "
            f"{r['base_mb']:.0f} | {t_ratio} | {m_ratio} | {events} | {r['proc_s']:.2f} |"
        )
    print(
        f"\ninput: {nbytes / 1e6:.1f} MB uncompressed; wall s / CPU s per run: "
        + "; ".join(f"{r['name']} {r['walls']} / {r['cpus']}" for r in results if "walls" in r)
    )


def store_report(run: Path, events: int | None, nbytes: int) -> None:
    """Size of prof-engine's run store per trace event (apparent bytes and disk blocks)."""
    files = [p for p in run.rglob("*") if p.is_file()]
    apparent = sum(p.stat().st_size for p in files)
    disk = sum(p.stat().st_blocks * 512 for p in files)
    if not events:
        return
    print(
        f"run store: {apparent / 1e6:.1f} MB in {len(files)} files ({disk / 1e6:.1f} MB on disk) "
        f"for {events:,} events: "
        f"{apparent / events:.1f} B/event ({disk / events:.1f} B/event on disk), "
        f"{100 * apparent / nbytes:.1f} % of the JSON"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100, help="size of the synthetic trace (MB, uncompressed)")
    ap.add_argument("--trace", type=Path, help="use this trace instead of generating one")
    ap.add_argument("--skip", action="append", default=[], choices=NAMES, help="leave a contender out (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per contender: best wall, median peak RSS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--blocks",
        type=int,
        default=16,
        help="conv blocks per step of the synthetic trace (16: "
        "~0.7 MB of JSON per step; 160: ~7 MB, closer to a large model's step)",
    )
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "prof-engine-bench")
    ap.add_argument("--profile", action="store_true", help="also cProfile prof-engine's import")
    ap.add_argument("--top", type=int, default=15, help="functions listed by --profile")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (workdir/runs-PID)")
    ap.add_argument(
        "--hta-python",
        help="interpreter with `hta` installed that runs the hta contender "
        "(default: this one if hta imports here, else $PROF_ENGINE_HTA_PYTHON)",
    )
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
    print(f"trace: {trace} ({nbytes / 1e6:.1f} MB uncompressed, {disk_bytes(trace) / 1e6:.1f} MB on disk)")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    results = []
    for name in NAMES:
        if name in a.skip:
            continue
        python = None
        if name == "hta":
            python, why = hta_python(a.hta_python)
            if python is None:
                results.append({"name": name, "skipped": why})
                continue
        print(f"running {name} ...", flush=True)
        results.append(run_repeated(name, trace, runs, a.repeat, python))
    print_table(results, nbytes)
    for r in results:
        if r.get("children"):
            print(
                f"{r['name']}: forked {r['children']} worker(s): {r['children_cpu_s']:.2f} CPU s of theirs in CPU s; "
                f"own peak {r['self_peak_mb']:.0f} MB, largest worker {r['children_peak_mb']:.0f} MB, "
                f"summed tree peak in peak RSS"
            )
    hta = next((r["hta"] for r in results if "hta" in r), None)
    if hta:
        print(
            f"hta: HolisticTraceAnalysis {hta['version']} (pandas {hta['pandas']}, Python {hta['python']}, "
            f"{hta['interpreter']}), parser backend {hta['backend']}; ranks {hta['ranks']}, "
            f"{hta['iterations']} iterations, {hta['columns']} columns; rows by cat: "
            + ", ".join(f"{c} {n:,}" for c, n in sorted(hta["rows_by_cat"].items(), key=lambda kv: -kv[1]))
        )
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
