"""After an import: the vendor's own summaries beside the records, compared with the same reports
rebuilt from the imported records.

torch_npu and MindSpore write, beside the raw records of a rank (trace_view.json,
kernel_details.csv, the `.db`), summaries of them: `step_trace_time.csv` or a `.db` export's
`analysis.db` table StepTraceTime (what step_trace computes), and `op_statistic.csv`
(op_statistic's device rows), and `communication.json` (communication's ops and their elapse
times); msprof writes `op_statistic_<timestamp>.csv` into a PROF_*
directory's `mindstudio_profiler_output/` (per `Device_id`). Where the two disagree beyond the vendor's
rounding, records are missing from what was imported (a kernel_details.csv of 21 rows beside a
step_trace_time.csv of 75 ms Computing: 27 ms rebuilt, and advice saw the device 86 % idle), or the
summary is of another capture; either way no report of the run is to be trusted as is. Each
disagreement is said as the finding `vendor_summary_mismatch` of its source: ours, theirs, which
file.

It runs once the run is published (`check_run`, called by `import_trace`, the import users call:
`prof_engine.import_trace`, `prof-engine import`, `offline_analyse`): the rebuilt reports are the
engine's views over the run (one implementation of each computation), so this step reads the run
like any reader and then adds its findings to the manifest's sources. It uses both a source's
knowledge (where the vendor's files lie) and the engine, so it sits above both, with the faces:
the importers never load the engine.

The vendor's rounding: step_trace_time.csv sums intervals of sub-ns device times printed to the
ns (up to 1 ns per device task of the step) and takes Stage and Preparing as differences of µs
timestamps in float64 (0.25 µs apart at 1.7e15 µs); op_statistic.csv sums durations printed to
the ns (0.5 ns per op). A value counts as a disagreement beyond `TOLERANCE_US` + 1 ns per task.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from prof_engine.importers import import_sources
from prof_engine.importers.ascend import OUTPUT_DIR, read_csv, vendor_finding
from prof_engine.store.files import write_text
from prof_engine.store.manifest import MANIFEST, load_manifest

STEP_TRACE = "step_trace_time.csv"
OP_STATISTIC = "op_statistic.csv"
COMMUNICATION = "communication.json"
ANALYSIS_DB = "analysis.db"  # a `.db` export's: its StepTraceTime table is step_trace_time.csv's rows
FORMATS = ("torch_npu", "mindspore")  # sources that are an Ascend rank directory
MSPROF, MSPROF_OUTPUT = "msprof", "mindstudio_profiler_output"  # a PROF_* directory's merged output
MSPROF_OP_STATISTIC = re.compile(r"op_statistic_\d{14}\.csv")  # its op_statistic (newest export last)
STEP_COLUMNS = (
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
)
TOLERANCE_US = 0.5  # print rounding and float64 spacing of the vendor's µs, with room to spare
SHOWN = 3  # disagreements named in a finding's detail (its count has them all)


@functools.wraps(import_sources)
def import_trace(*args: Any, **kwargs: Any) -> Path:
    run = import_sources(*args, **kwargs)
    check_run(run)  # vendor summaries beside the records vs the reports rebuilt from them
    return run


def _summaries(source: dict[str, Any]) -> list[Path]:
    """The vendor summaries beside a source's records: a torch_npu/MindSpore rank directory's, or
    the newest `op_statistic_<timestamp>.csv` of an msprof PROF_* directory's merged output."""
    if source.get("format") == MSPROF:
        out = Path(source["path"]) / MSPROF_OUTPUT
        found = sorted(p for p in out.glob("op_statistic_*.csv") if MSPROF_OP_STATISTIC.fullmatch(p.name))
        return found[-1:]
    if source.get("format") not in FORMATS:
        return []
    out = Path(source["path"]) / OUTPUT_DIR
    return [out / name for name in (STEP_TRACE, OP_STATISTIC, COMMUNICATION, ANALYSIS_DB) if (out / name).is_file()]


def check_run(run: Path) -> int:
    """Compare the vendor summaries beside each Ascend source of the published run at `run` with
    the rebuilt reports; add a `vendor_summary_mismatch` finding per source and file that
    disagrees (and what could not be read of them) to the manifest. A check that cannot run (out
    of memory) is the finding `vendor_file_left_out`: the run is published, and stays whole.
    Returns how many sources got findings."""
    manifest = load_manifest(run)
    todo = [(src, files) for src in manifest.get("sources", []) if (files := _summaries(src))]
    if not todo:
        return 0
    from prof_engine.engine import open_run  # the rebuilt reports are the engine's views: loaded where needed

    before = [json.dumps(src.get("info"), sort_keys=True, default=str) for src, _ in todo]
    try:
        with open_run(run) as run_:
            _compare(_Rebuilt(run_), todo)
    except Exception as e:  # noqa: BLE001 - the run is published and whole: a check that cannot run is said, not fatal
        why = f"{type(e).__name__}: {str(e)[:160]}"
        for src, files in todo:
            names = ", ".join(p.name for p in files)
            vendor_finding(
                src.setdefault("info", {}),
                "vendor_file_left_out",
                1,
                f"{Path(src['path'])}: {names} not compared with the rebuilt reports ({why})",
                None,
            )
    added = sum(json.dumps(src.get("info"), sort_keys=True, default=str) != b for (src, _), b in zip(todo, before))
    if added:
        write_text(run / MANIFEST, json.dumps(manifest, indent=1, default=str))
    return added


def _compare(r: _Rebuilt, todo: list[tuple[dict[str, Any], list[Path]]]) -> None:
    """Each source's summaries against the rebuilt reports: findings into the source's info."""
    for src, files in todo:
        info = src.setdefault("info", {})
        for path in files:
            check = (
                _op_statistic
                if path.name.startswith("op_statistic")
                else _communication
                if path.name == COMMUNICATION
                else _step_trace
            )
            differ, device = check(r, int(src["rank"]), path, info)
            if differ:
                shown = "; ".join(differ[:SHOWN]) + (f"; and {len(differ) - SHOWN} more" if len(differ) > SHOWN else "")
                vendor_finding(info, "vendor_summary_mismatch", len(differ), f"{path}: {shown}", device)


def _us(v: float | None) -> str:
    return "none" if v is None else f"{v:,.3f} µs"


def _number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


COMM_TOLERANCE_MS = 0.001  # communication.json's times match to it (tests/test_communication.py)


class _Rebuilt:
    """The rebuilt reports of the run by rank, each view computed once for all ranks (on first use)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def steps(self, rank: int) -> dict[int, dict[str, Any]]:
        """step_trace's rows of `rank` by step."""
        return self._steps.get(rank, {})

    def tasks(self, rank: int) -> dict[int | None, int]:
        """Device tasks of `rank` by step (the vendor's rounding grows with them)."""
        return self._tasks.get(rank, {})

    def comms(self, rank: int) -> dict[tuple[int | None, str], tuple[str, float]]:
        """communication's rows of `rank`: (step, op name) -> (device, elapse ms)."""
        return self._comms.get(rank, {})

    def ops(self, rank: int) -> list[tuple]:
        """op_statistic's device rows of `rank`: (device, op type, core type, count, total µs)."""
        return self._ops.get(rank, [])

    @functools.cached_property
    def _steps(self) -> dict[int, dict[int, dict[str, Any]]]:
        found: dict[int, dict[int, dict[str, Any]]] = {}
        for row in self.run.sql('SELECT * FROM step_trace WHERE "Step" IS NOT NULL').arrow().to_pylist():
            found.setdefault(row["Rank"], {})[row["Step"]] = row
        return found

    @functools.cached_property
    def _tasks(self) -> dict[int, dict[int | None, int]]:
        found: dict[int, dict[int | None, int]] = {}
        for rk, step, n in self.run.sql(
            "SELECT rank, step, count(*) FROM slices WHERE device <> 'host' GROUP BY rank, step"
        ).rows():
            found.setdefault(rk, {})[step] = n
        return found

    @functools.cached_property
    def _comms(self) -> dict[int, dict[tuple[int | None, str], tuple[str, float]]]:
        found: dict[int, dict[tuple[int | None, str], tuple[str, float]]] = {}
        for rk, dev, step, name, elapse in self.run.sql(
            'SELECT "Rank", "Device", "Step", "Op Name", "Elapse Time(ms)" FROM communication'
        ).rows():
            found.setdefault(rk, {})[(step, name)] = (dev, elapse)
        return found

    @functools.cached_property
    def _ops(self) -> dict[int, list[tuple]]:
        found: dict[int, list[tuple]] = {}
        for rk, *row in self.run.sql(
            """SELECT "Rank", "Device", "OP Type", "Core Type", "Count", "Total Time(us)" FROM op_statistic
               WHERE "Device" <> 'host'"""
        ).rows():
            found.setdefault(rk, []).append(tuple(row))
        return found


def _step_trace(r: _Rebuilt, rank: int, path: Path, info: dict[str, Any]) -> tuple[list[str], str]:
    """Disagreements of step_trace_time.csv (or analysis.db's StepTraceTime) with the rank's
    `step_trace` rows, step by step."""
    if path.name == ANALYSIS_DB:
        theirs = _step_trace_table(path, info)
    else:
        columns = {c: (c,) for c in ("Step", *STEP_COLUMNS)}
        theirs = read_csv(path, columns, required=("Step",), info=info, optional=True)
    ours = r.steps(rank)
    device = next((row["Device"] for row in ours.values()), "npu")
    tasks = r.tasks(rank) if theirs else {}
    differ: list[str] = []
    for t in theirs:
        step = None if t["Step"] is None else str(t["Step"])
        if step is None or not step.isdigit():
            continue  # a summary row of no step (the vendor's total of an unscheduled capture)
        mine = ours.get(int(step))
        if mine is None:
            differ.append(f"step {step}: in the file, not in the records")
            continue
        tol = TOLERANCE_US + tasks.get(int(step), 0) / 1000
        for col in STEP_COLUMNS:
            want = _number(t.get(col))
            if want is None or col not in mine:
                continue  # a column this version of the file has not
            got = mine[col]
            if got is None or abs(got - want) > tol:
                differ.append(f"step {step} {col} {_us(got)} rebuilt, {_us(want)} in the file")
    return differ, device


def _step_trace_table(path: Path, info: dict[str, Any]) -> list[dict[str, Any]]:
    """analysis.db's StepTraceTime rows under step_trace_time.csv's column names (its columns are
    the same in snake case: `communication_not_overlapped`); none from a database without it."""
    names = {c.lower().replace("(", "_").replace(")", "").replace(" ", "_"): c for c in ("Step", *STEP_COLUMNS)}
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)  # writes nothing beside it
        try:
            cur = con.execute("SELECT * FROM StepTraceTime")
            header = [names.get(d[0].lower()) for d in cur.description]
            return [{c: v for c, v in zip(header, row) if c} for row in cur.fetchall()]
        finally:
            con.close()
    except sqlite3.Error as e:
        vendor_finding(info, "vendor_file_left_out", 1, f"{path}: no StepTraceTime table to compare ({e})", None)
        return []


def _communication(r: _Rebuilt, rank: int, path: Path, info: dict[str, Any]) -> tuple[list[str], str]:
    """Disagreements of communication.json with the rank's `communication` rows: the ops of each
    step (`step<N>` → kind → `<op name>@<group>`), and each op's Elapse Time(ms)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        theirs = [
            (
                int(key[4:]) if key[4:].isdigit() else None,
                op.split("@")[0],
                float(v["Communication Time Info"]["Elapse Time(ms)"]),
            )
            for key, kinds in data.items()
            for kind in kinds.values()
            for op, v in kind.items()
            if op != "Total Op Info"
        ]
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError) as e:
        vendor_finding(
            info,
            "vendor_file_left_out",
            1,
            f"{path}: not communication.json as torch_npu writes it ({e!r:.80}): not compared",
            None,
        )
        return [], "npu"
    ours = dict(r.comms(rank))
    device = next((dev for dev, _ in ours.values()), "npu")
    differ: list[str] = []
    for step, op, want in theirs:
        _, got = ours.pop((step, op), (None, None))
        if got is None:
            differ.append(f"step {step} {op}: in the file, not rebuilt")
        elif abs(got - want) > COMM_TOLERANCE_MS:
            differ.append(f"step {step} {op} Elapse Time {got:,.3f} ms rebuilt, {want:,.3f} ms in the file")
    if theirs:
        differ += [f"step {step} {op}: rebuilt, not in the file" for (step, op) in sorted(ours, key=str)]
    return differ, device


def _op_statistic(r: _Rebuilt, rank: int, path: Path, info: dict[str, Any]) -> tuple[list[str], str]:
    """Disagreements of op_statistic.csv with the rank's device rows of `op_statistic`: each op
    type and core type's count, and its total time; per device where the file has msprof's
    `Device_id` column (its `host` rows are no device's)."""
    columns = {
        "OP Type": ("OP Type",),
        "Core Type": ("Core Type",),
        "Count": ("Count",),
        "Total": ("Total Time(us)",),
        "Device": ("Device_id",),
    }
    theirs = read_csv(path, columns, required=("OP Type", "Core Type", "Count", "Total"), info=info, optional=True)
    per_device = any(t.get("Device") is not None for t in theirs)
    rows = r.ops(rank)
    ours = {(dev if per_device else None, op, core): (n, total) for dev, op, core, n, total in rows}
    device = rows[0][0] if rows else "npu"
    differ: list[str] = []
    for t in theirs:
        dev = t.get("Device")
        if per_device and not (dev or "").isdigit():
            continue  # msprof's `host` rows
        key = (f"npu{dev}" if per_device else None, t["OP Type"], t["Core Type"])
        want_n, want_total = _number(t["Count"]), _number(t["Total"])
        n, total = ours.pop(key, (0, None))
        name = f"{key[1]} ({key[2]}{', ' + key[0] if key[0] else ''})"
        if want_n is not None and n != want_n:
            differ.append(f"{name} count {n} rebuilt, {int(want_n)} in the file")
        elif want_total is not None and (total is None or abs(total - want_total) > TOLERANCE_US + n / 1000):
            differ.append(f"{name} total {_us(total)} rebuilt, {_us(want_total)} in the file")
    for (dev, op, core), (n, _) in sorted(ours.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if theirs:
            differ.append(f"{op} ({core}{', ' + dev if dev else ''}) count {n} rebuilt, not in the file")
    return differ, device
