"""Import throughput of msprof timelines whose events carry long names, beside the Kineto path.

    python benchmarks/msprof_names.py                         # 3, 10 and 34 MB, name ~2 KB
    python benchmarks/msprof_names.py --mb 3 --mb 10 --name-bytes 8192 --profile

Writes a CANN msprof PROF_* directory (`mindstudio_profiler_output/msprof_<ts>.json`, the modern
layout) whose events carry long names: device tasks named like MindSpore fused-op scopes
(`Default/network/…/FusedMatMulAdd…-op123`, `--name-bytes` long) and CANN API calls with a long
`args` string, as fuzzing a fusion-heavy graph gives. For each size it times
`prof_engine.import_trace` on it and on a Kineto trace of the same size (`gen_kineto.py`), each
in a fresh process. MB/s = file bytes (10^6) / wall time of the import alone.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAMP = "20250101000000"
PROF = "PROF_000001_20250101000000000_LONGNAMESLONGNAME"
EPOCH_US = 1_736_408_883_000_000  # modern msprof: local epoch µs
MONO_US = 56_635_864_000  # legacy msprof: the host's CLOCK_MONOTONIC_RAW µs (start_info places it)
TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU")
LAYOUTS = ("legacy", "modern")
_WORD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_OPS = ("Cast", "TransData", "MatMul", "BiasAdd", "Relu", "Mul", "ReduceSum", "Add", "Conv2D", "Softmax")
DEVICE_PID, CANN_PID, CANN_TID = 3, 1003602, 16027


def _meta(pid: int, name: str, label: str, threads: dict[int, str]) -> list[dict]:
    out = [
        {"name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}, "ph": "M"},
        {"name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}, "ph": "M"},
    ]
    out += [{"name": "thread_name", "pid": pid, "tid": t, "args": {"name": n}, "ph": "M"} for t, n in threads.items()]
    return out


def _words(rng: random.Random) -> list[str]:
    """The pieces fused names are made of: `<Op>_<index>_<random suffix>`."""
    return [
        f"{rng.choice(_OPS)}_{rng.randint(0, 999)}_{''.join(rng.choices(_WORD, k=rng.randint(4, 16)))}"
        for _ in range(256)
    ]


def _fused(rng: random.Random, words: list[str], n: int) -> str:
    """A fused op's name of about n characters: `trans_TransData_12_Cast_3_…` (GE's fusion names)."""
    return "trans_" + "_".join(rng.choices(words, k=max(1, n // 10)))[:n]


def _task_name(rng: random.Random, words: list[str], n: int, i: int) -> tuple[str, str | None]:
    """A device task's long name and the op type a reader takes from it in a legacy timeline: a
    MindSpore node `Default/…/<Fused>-op<i>` has the type `<Fused>`; GE's fusion names without
    `-op<i>` (whole, or after a scope with `-` in it) have none."""
    fused = _fused(rng, words, n)
    if i % 3 == 0:
        return f"Default/network-WithLossCell/_backbone-Net/{fused}-op{i}", fused
    if i % 3 == 1:
        return fused, None
    return f"Default/network-WithLossCell/{fused}-fusion/{fused[: n // 4]}-x{i}", None


def write_timeline(path: Path, mb: float, layout: str = "legacy", name_bytes: int = 2048, seed: int = 0) -> dict:
    """Write a Chrome trace array of about `mb` MB (10^6 bytes) whose device tasks and CANN API
    calls carry long names (`layout`: `legacy` monotonic µs floats, `NPU` label, a Step Trace lane;
    `modern` epoch µs strings, `NPU 0`); return what a reader must find in it: `tasks` (name →
    op type), `apis` (the count of CANN calls), `first_ts_us` and `last_end_us`."""
    rng = random.Random(seed)
    words = _words(rng)
    legacy = layout == "legacy"
    t0 = MONO_US if legacy else EPOCH_US
    events = _meta(
        DEVICE_PID,
        "Ascend Hardware",
        "NPU" if legacy else "NPU 0",
        {2: "Stream 2", 3: "Stream 3", **({10036: "Step Trace(Model ID:1)"} if legacy else {})},
    ) + _meta(CANN_PID, "CANN", "CPU", {CANN_TID: f"Thread {CANN_TID}"})
    target = int(mb * 1e6)
    written, i, apis = 0, 0, 0
    tasks: dict[str, str | None] = {}
    with open(path, "w", encoding="utf-8") as f:
        f.write("[")
        for ev in events:
            text = json.dumps(ev)
            f.write(text + ",\n")
            written += len(text) + 2
        last = ""
        while written < target:
            ts_us = t0 + i * 50
            ts: float | str = ts_us + (i % 100) / 100 if legacy else f"{ts_us}.{i % 1000:03d}"
            if i % 2 == 0:
                name, op_type = _task_name(rng, words, name_bytes, i // 2)
                tasks[name] = op_type
                ev = {
                    "name": name,
                    "pid": DEVICE_PID,
                    "tid": 2 + i % 4 // 2,
                    "ts": ts,
                    "dur": 12.5,
                    "args": {
                        "Task Type": TASK_TYPES[i % 4],
                        "Stream Id": 2 + i % 4 // 2,
                        "Task Id": i // 2,
                        "Physic Stream Id": 2 + i % 4 // 2,
                        "connection_id": i // 2,
                    },
                    "ph": "X",
                }
            else:
                ev = {
                    "name": "aclnnMatmul_" + str(i % 5),
                    "pid": CANN_PID,
                    "tid": CANN_TID,
                    "ts": ts,
                    "dur": 3.25,
                    "args": {
                        "Thread Id": CANN_TID,
                        "Mode": "ACL_OP",
                        "level": "acl",
                        "id": i // 2,
                        "item_id": _fused(rng, words, name_bytes // 2),
                        "connection_id": i // 2,
                    },
                    "ph": "X",
                }
                apis += 1
            if last:
                f.write(last + ",\n")
                written += len(last) + 2
            last = json.dumps(ev, ensure_ascii=False)
            i += 1
        end_us = t0 + i * 50 + 100
        if legacy:  # the one iteration, over everything
            last += ",\n" + json.dumps(
                {
                    "name": "Iteration 1",
                    "pid": DEVICE_PID,
                    "tid": 10036,
                    "ts": t0 - 10,
                    "dur": end_us - t0 + 10,
                    "cat": "Iteration Time",
                    "args": {"Iteration ID": 1},
                    "ph": "X",
                }
            )
        f.write(last + "]\n")
    return {"tasks": tasks, "apis": apis, "first_ts_us": t0 - (10 if legacy else 0)}


def write_prof_dir(
    root: Path, mb: float, layout: str = "legacy", name_bytes: int = 2048, seed: int = 0
) -> tuple[Path, Path, dict]:
    """A PROF_* directory (`layout`: legacy `device_0/timeline/msprof_0_1_1.json` or modern
    `mindstudio_profiler_output/msprof_<ts>.json`) holding one long-name timeline; (the directory
    to import, the timeline, `write_timeline`'s answer)."""
    prof = root / PROF
    dev = prof / "device_0"
    timeline = (
        dev / "timeline" / "msprof_0_1_1.json"
        if layout == "legacy"
        else prof / "mindstudio_profiler_output" / f"msprof_{STAMP}.json"
    )
    timeline.parent.mkdir(parents=True, exist_ok=True)
    dev.mkdir(exist_ok=True)
    (dev / "info.json.0").write_text(json.dumps({"rank_id": 0, "DeviceInfo": [{"id": 0}]}))
    if layout == "legacy":
        (dev / "start_info.0").write_text(
            json.dumps({"collectionTimeBegin": str(EPOCH_US), "clockMonotonicRaw": str(MONO_US * 1000)})
        )
    return (dev if layout == "legacy" else prof), timeline, write_timeline(timeline, mb, layout, name_bytes, seed)


def _child(trace: str, out: str, profile: bool) -> None:
    import prof_engine

    import_trace = prof_engine.import_trace  # the importers' modules load here, outside the timing
    t = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    import_trace([trace], out, force=True)
    wall = time.perf_counter() - t
    if profile:
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    print(json.dumps({"wall": wall}))


def _time(trace: Path, out: Path, profile: bool) -> float:
    r = subprocess.run(
        [sys.executable, __file__, "--child", str(trace), str(out)] + (["--profile"] if profile else []),
        capture_output=True,
        text=True,
        check=True,
    )
    if profile:
        print(r.stderr, file=sys.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])["wall"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, action="append", help="timeline size in MB (repeatable; default 3, 10, 34)")
    p.add_argument("--layout", choices=LAYOUTS, action="append", help="msprof layout (repeatable; default both)")
    p.add_argument("--name-bytes", type=int, default=2048, help="length of a device task's name (default 2048)")
    p.add_argument("--repeat", type=int, default=1, help="best of N imports (default 1)")
    p.add_argument("--skip-kineto", action="store_true", help="leave out the Kineto trace of the same size")
    p.add_argument("--profile", action="store_true", help="cProfile the msprof imports (to stderr)")
    p.add_argument("--workdir", type=Path, default=None, help="where the traces and runs go (default: a temp dir)")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(*args.child, args.profile)
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="msprof-names-"))
    layouts = args.layout or list(LAYOUTS)
    print(
        f"{'MB':>6} "
        + " ".join(
            f"{x + ' s':>10} {x + ' MB/s':>12}" for x in [*layouts, "kineto"][: len(layouts) + (not args.skip_kineto)]
        )
    )
    for mb in args.mb or [3, 10, 34]:
        row = f"{mb:6g} "
        for layout in layouts:
            unit, timeline, _ = write_prof_dir(work / f"{layout}-{mb:g}", mb, layout, args.name_bytes)
            wall = min(_time(unit, work / "run", args.profile) for _ in range(args.repeat))
            row += f"{wall:10.2f} {timeline.stat().st_size / 1e6 / wall:12.1f} "
        if not args.skip_kineto:
            kineto = work / f"kineto-{mb:g}.json"
            if not kineto.exists():
                subprocess.run(
                    [sys.executable, str(HERE / "gen_kineto.py"), "--mb", str(mb), "-o", str(kineto)],
                    check=True,
                    capture_output=True,
                )
            wall = min(_time(kineto, work / "run", False) for _ in range(args.repeat))
            row += f"{wall:10.2f} {kineto.stat().st_size / 1e6 / wall:12.1f}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
