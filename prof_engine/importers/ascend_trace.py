"""A lone Ascend Chrome trace (`trace_view.json`, `msprof_*.json`) given as a file or found loose in
a folder: the importer protocol's entry for it. The converter is `msprof.convert_trace`
(`AscendConverter`, with the sibling kernel_details.csv when there is one).
"""

from __future__ import annotations

import re
from pathlib import Path

from prof_engine.importers import msprof
from prof_engine.importers.formats import TRACE_ARRAY, Format, lead

_NAME = re.compile(r"trace_view\.json|msprof_.*\.json")
_HEAD = re.compile(rb'"Ascend Hardware"|"labels"\s*:\s*"NPU')


def sniff(path: Path, head: bytes) -> bool:
    """A Chrome-trace array from Ascend tools: by name (trace_view.json, msprof_*.json) or by its
    first bytes naming an Ascend lane (`Ascend Hardware`, an `NPU` process label)."""
    return bool(TRACE_ARRAY.match(lead(head))) and bool(_NAME.fullmatch(path.name) or _HEAD.search(head))


# before Chrome's in the registry: these arrays are Chrome traces too, with Ascend lanes
FORMAT = Format("ascend_trace", "ascend", msprof.convert_trace, files=re.compile(r"(?is).*\.json(\.gz)?"), sniff=sniff)
