"""The formats prof-engine imports, in priority order: the one list the import asks.

A folder belongs to the first format (or layout) here that finds units in it: a torch_npu rank
directory holds msprof PROF_* directories and MindSpore CPU op files of its own, read by its
converter, so the Ascend rank directory comes first. A file is the first format's whose `files`
name claims it, else whose `sniff` of its first bytes does: a lone Ascend trace before the Chrome
traces it is a kind of. Adding a format: its module exposes a `FORMAT` (`formats.Format`), and
one line here puts it in its place.
"""

from __future__ import annotations

from prof_engine.importers import (
    ascend,
    ascend_trace,
    kineto,
    mindspore_cpu,
    mindspore_legacy,
    msprof,
    msprof_output,
)
from prof_engine.importers.formats import Format

FORMATS: tuple[Format, ...] = (
    ascend.FORMAT,  # *_ascend_pt / *_ascend_ms rank directories with ASCEND_PROFILER_OUTPUT/
    msprof_output.FORMAT,  # PROF_* with mindstudio_profiler_output/ (CANN >= 8)
    msprof.FORMAT,  # legacy PROF_*/device_N/timeline/ (CANN <= 7): same layout as the line above
    mindspore_legacy.FORMAT,  # MindSpore <= 2.2 flat summaries: recognised and refused with the reason
    mindspore_cpu.FORMAT,  # MindSpore CPU profiler's cpu_op_execute_timestamp_<rank>.txt
    ascend_trace.FORMAT,  # a lone Ascend Chrome trace
    kineto.FORMAT,  # Chrome trace / Kineto JSON
)


def get(name: str) -> Format:
    """The registered format of this name (a unit's `format`)."""
    return next(fmt for fmt in FORMATS if fmt.name == name)
