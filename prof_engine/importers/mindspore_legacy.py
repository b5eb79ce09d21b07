"""Legacy MindSpore (≤ 2.2) flat profiler summaries: recognised, read, and refused with the reason.

Before MindSpore adopted the `*_ascend_ms/ASCEND_PROFILER_OUTPUT` layout its profiler wrote flat
per-rank files (ascend_formats.md §1.2 end). This module owns recognising such a folder and
reading the two files a run would need:

* `step_trace_raw_{rank}_detail_time.csv`: one row per iteration (`step_num` 1..N, then a `-` row
  of averages) with `start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,
  tail`, then one `stream_<s>_<i>_<Op>-op<N>{,_start_point,_end_point}` triplet per collective.
  Every value is a **device syscnt tick count** (checked: `total == end_point − start_point` on
  every step row), not a time.
* `hccl_raw_{rank}.csv`: `step_num,communication_cost,wait_cost,link_info,
  communication_operator_cost` — per-step totals in **ms** with JSON-in-CSV per-op costs, and
  no start times at all.

Placing these records in time needs the syscnt frequency and an anchor from syscnt to the epoch;
neither is in these files (the flat summaries of the fixture `mindspore_legacy_4rank_pipeline_
parallel` come without the run's PROF_* device data or a profiler_info start_info). A frequency
would be a guess, so `convert` reads and checks the files, then raises a one-line InputError
saying what the folder is and why; import the run's PROF_* directory instead, or profile with
MindSpore ≥ 2.3. hccl_raw alone cannot make communication slices either: it has no start times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from prof_engine.errors import InputError
from prof_engine.importers.chrome import Sink
from prof_engine.importers.formats import Format
from prof_engine.importers.jsonstream import read_json
from prof_engine.importers.vendor_csv import VendorCsv

STEP_TRACE = re.compile(r"step_trace_raw_(\d+)_detail_time\.csv")
HCCL_RAW = re.compile(r"hccl_raw_(\d+)\.csv")
STEP_COLUMNS = ("step_num", "start_point", "end_point", "total")


def is_legacy_dir(path: Path) -> bool:
    """A folder holding legacy MindSpore summaries (step_trace_raw_*_detail_time.csv / hccl_raw_*.csv)."""
    return any(STEP_TRACE.fullmatch(p.name) or HCCL_RAW.fullmatch(p.name) for p in path.iterdir() if p.is_file())


def units(path: Path) -> list[Path]:
    """The folder itself when it holds legacy summaries (one unit, refused by `convert`), else []."""
    return [path] if is_legacy_dir(path) else []


def ranks(path: Path) -> list[int]:
    """Ranks that have a step_trace_raw or hccl_raw file in the folder."""
    found = set()
    for p in path.iterdir():
        m = STEP_TRACE.fullmatch(p.name) or HCCL_RAW.fullmatch(p.name)
        if m and p.is_file():
            found.add(int(m.group(1)))
    return sorted(found)


def _dict_rows(csv_path: Path) -> list[dict[str, str]]:
    """The rows of a summary by header, read strictly (`vendor_csv`): a row that cannot be read is
    an error naming the file and line (the counts this importer reports are of every row)."""
    table = VendorCsv(csv_path)
    rows = [dict(zip(table.header, cells)) for _, cells in table.rows()]
    if table.count():
        raise InputError(table.error())
    return rows


def step_rows(csv_path: Path) -> list[dict[str, str]]:
    """The per-iteration rows of a step_trace_raw file (the trailing `-` average row left out),
    checked to be syscnt tick counts: `total == end_point − start_point`."""
    rows = _dict_rows(csv_path)
    missing = [c for c in STEP_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise InputError(
            f"{csv_path}: not a MindSpore step_trace_raw file (no rows, or no column {', '.join(missing)})"
        )
    steps = [r for r in rows if r["step_num"].strip().isdigit()]
    for r in steps:
        try:
            ok = int(r["end_point"]) - int(r["start_point"]) == int(r["total"])
        except ValueError:
            ok = False
        if not ok:
            raise InputError(
                f"{csv_path}: step {r['step_num']}: start_point/end_point/total are not consistent "
                "syscnt tick counts; unrecognised step_trace_raw variant"
            )
    return steps


def hccl_rows(csv_path: Path) -> list[dict[str, object]]:
    """The per-iteration rows of an hccl_raw file with their per-op costs decoded (ms)."""
    rows = [r for r in _dict_rows(csv_path) if (r.get("step_num") or "").strip().isdigit()]
    try:
        return [
            {**r, "communication_operator_cost": json.loads(r["communication_operator_cost"] or "{}")} for r in rows
        ]
    except (KeyError, json.JSONDecodeError):
        raise InputError(
            f"{csv_path}: not a MindSpore hccl_raw file (communication_operator_cost is not JSON)"
        ) from None


def _clock_files(path: Path) -> list[str]:
    """Files in the folder that could say the syscnt frequency or anchor the clock."""
    names = [
        p
        for p in path.rglob("*")
        if p.is_file()
        and (
            re.fullmatch(r"(info\.json|start_info|host_start\.log|dev_start\.log)(\.\d+)?", p.name)
            or p.name.startswith("PROF_")
        )
    ]
    for p in path.rglob("profiler_info*.json"):
        try:
            data = read_json(p)
        except InputError:
            continue
        if isinstance(data, dict) and isinstance(data.get("start_info"), dict) and "freq" in data["start_info"]:
            names.append(p)
    return sorted(str(p.relative_to(path)) for p in names)


def convert(path: Path, index: int, sink: Sink, progress: Callable[[int], None]) -> NoReturn:
    """Read and check the folder, then refuse it in one line: what it is and why it cannot be imported."""
    rs = ranks(path)
    counts = []
    for r in rs:
        st = path / f"step_trace_raw_{r}_detail_time.csv"
        counts.append(f"{r}: {len(step_rows(st))}" if st.is_file() else f"{r}: -")
        if (path / f"hccl_raw_{r}.csv").is_file():
            hccl_rows(path / f"hccl_raw_{r}.csv")
    what = (
        f"{path}: legacy MindSpore profiler summaries (step_trace_raw_<rank>_detail_time.csv, hccl_raw_<rank>.csv; "
        f"ranks {', '.join(map(str, rs))}; steps per rank {{{', '.join(counts)}}})"
    )
    clock = _clock_files(path)
    if clock:
        raise InputError(
            f"{what}: converting their device syscnt ticks is not supported; import the run's "
            f"PROF_* directory or its ASCEND_PROFILER_OUTPUT instead (found {', '.join(clock[:3])})"
        )
    raise InputError(
        f"{what} cannot be imported: their times are device syscnt ticks and the folder holds no tick "
        "frequency or clock anchor (no PROF_* device data, no profiler_info start_info) to place them "
        "in time; import the run's PROF_* directory, or profile with MindSpore >= 2.3 "
        "(ASCEND_PROFILER_OUTPUT)"
    )


# -- the importer protocol ---------------------------------------------------------------------
FORMAT = Format("mindspore_legacy", "ascend", convert, units=units)
