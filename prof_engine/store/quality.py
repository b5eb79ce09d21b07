"""What an import had to guess, in one catalogue: the rules of the `data_quality` view.

An importer that guesses (reads a value it cannot trust, invents a rank, drops what it cannot
place) records a *finding* in its source's `info["findings"]` with `add_finding`; the manifest
keeps them, `prof-engine import` prints one warning line per rule, and the `data_quality` view
lists them beside the rules computed from the tables (queries/data_quality.sql). A rule that is
not in `RULES` is a programming error, so every finding has a description users can read.
"""

from __future__ import annotations

from typing import Any

# rule -> what it means for the numbers (one line, shown by `prof-engine check`).
# Import-time rules (recorded by importers) and table rules (computed by queries/data_quality.sql)
# share this catalogue so `check`, `info` and the report describe both alike.
RULES: dict[str, str] = {
    # --- recorded at import
    "negative_durations": "slices that end before they start, read as 0 µs long",
    "unclosed_slices": "B (or async b) events never ended: closed at the latest end of their thread's or track's later events",
    "unmatched_ends": "end events (E, async e) with nothing open to end on their thread or track: dropped",
    "values_out_of_range": "slices outside any real run (far from the dense body of their file's starts: beyond 10 minutes and 10x the body's span, or 7 days; 2^62 ns from 0; longer than 7 days): dropped; step numbers beyond int32: not steps",
    "invented_rank": "the source says no rank: its rank is the file's position among the sources",
    "missing_ranks": "ranks of the job (its world size) with no trace in the run: cluster views cover the others",
    "clock_anchor": "times moved onto the Unix clock by an offset the source wrote (a base time, a clock anchor)",
    "unanchored_clock": "times on a host monotonic clock that no file anchors to the Unix clock: durations right, dates not",
    "unknown_categories": "event categories this build does not know: kind 'other', in slice_statistic and the timeline but no kind-based report",
    "unmatched_vendor_rows": "vendor summary rows (kernel_details) matched to no trace record",
    "ragged_vendor_rows": "vendor CSV rows with more or fewer cells than their header: cells after the name and times dropped (shifted)",
    "vendor_rows_left_out": "vendor CSV rows that cannot be read (a stray quote, a row cut short or too long, a truncated file): left out, what they hold missing",
    "vendor_file_left_out": "vendor files the import cannot use (a column it needs missing, no rows): left out, what they hold missing from the run",
    "unlisted_device_tasks": "device tasks after the end of a truncated kernel list (kernel_details.csv): kernel or not by their task type alone, without op type or shapes",
    "duplicate_vendor_rows": "exact duplicate rows in a profiler database's record table (TASK, PYTORCH_API, ...) or a vendor kernel list (kernel_details.csv, op_summary): read once",
    "vendor_summary_mismatch": "a vendor summary beside the records (step_trace_time.csv, op_statistic.csv, communication.json, analysis.db) disagrees with the same report rebuilt from the imported records beyond the vendor's rounding: records are missing, or the file is of another capture",
    "long_names_cut": "names over 64 Ki characters (no real one is): cut to that length, so records of two such names may share one",
    "left_out_units": "import units (trace files, rank directories) that failed to import: left out of the run (the manifest's `skipped` says why)",
    "unread_files": "files of the imported directories that hold no trace prof-engine reads (configs, derived reports, other formats): not imported (the manifest's `left_out` names them)",
    "unrelated_sources": "sources of different jobs (formats, world sizes, hosts, times far apart) imported as one run on request (--merge-unrelated): cluster views compare unrelated ranks",
    # --- computed from the tables (queries/data_quality.sql)
    "other_records": "records of no known kind ('other') and no category: in slice_statistic and the timeline but no kind-based report",
    "unlinked_device_records": "device tasks linked to no host launch (no correlation id, or its launch missing)",
    "overlapping_host_records": "host records that overlap a sibling without nesting on one thread: nested by torch's tree rule, which closes the sibling",
    "overlapping_device_steps": "steps whose device spans overlap the next step's: their Free counts only idle time",
    "device_work_outside_steps": "device tasks outside every step window of a device that records its steps (Kineto's GPU ProfilerStep#N), e.g. the previous step's queued work: in step_trace's row of no step, in no step's time",
    "links_to_absent_ranks": "communication_matrix links to or from ranks the run does not hold (of the job, not imported): kept as the vendor lists them, their peer side missing from every cross-rank view",
}


# Rules that say how the data was read, not that a number may be wrong: `data_quality` and
# `check` list them, `import` does not warn and `--strict` does not fail on them.
# links_to_absent_ranks: the rows are the vendor's own (communication_matrix.json lists them too), so
# `check --strict` passes on a capture of some ranks of a job; a cross-rank reader still sees it.
NOTES = frozenset({"clock_anchor", "unread_files", "links_to_absent_ranks"})


def level(rule: str) -> str:
    """'note' for a rule of NOTES, else 'warning'."""
    return "note" if rule in NOTES else "warning"


_EVENTS = object()  # `add_finding`'s default whole: the source's events


def add_finding(
    info: dict[str, Any],
    rule: str,
    count: int,
    detail: str = "",
    device: str | None = None,
    total: int | None | object = _EVENTS,
) -> None:
    """Record in a source's `info` that `count` records fell under `rule` (a key of RULES);
    `detail` says what and where in one line (e.g. the first offending name). Its share is of
    the source's events unless `total` names the whole (None: no share). Count 0 records
    nothing; the same rule and device twice add up."""
    if rule not in RULES:
        raise ValueError(f"unknown data-quality rule {rule!r}")
    if count <= 0:
        return
    found = info.setdefault("findings", [])
    for f in found:
        if f["rule"] == rule and f.get("device") == device:
            f["count"] += int(count)
            return
    found.append(
        {
            "rule": rule,
            "count": int(count),
            "detail": detail,
            "device": device,
            **({} if total is _EVENTS else {"total": total}),
        }
    )
