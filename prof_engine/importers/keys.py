"""The keys of a Chrome/Kineto event that the converters read, spelled once, and how their values read.

`TOP_KEYS` are an event's own keys, `ARGS_KEYS` keys of its `args` object: the native scanner
(`scan`) records where their values lie, the pure-Python chunk source (`pychunks`) takes them from
the decoded events, the columnar converter (`chunkconv`) and the per-event one (`chrome.Args`) read
them by these names. The value readings below (`_int`, `_text`, Kineto's shapes and types text, a
`[memory]` event's device) serve every Chrome-family importer.
"""

from __future__ import annotations

from typing import Any

from prof_engine.importers import classify

EXTERNAL_ID = "External id"
EXTERNAL_ID_2021 = "external id"  # Kineto's device and runtime records of 2021 spell it so
CORRELATION = "correlation"
STREAM = "stream"
DEVICE = "device"
INPUT_DIMS = "Input Dims"
INPUT_TYPE = "Input type"
COLLECTIVE = "Collective name"
PG_NAME = "Process Group Name"
TOTAL_ALLOCATED = "Total Allocated"  # of a `[memory]` instant, as the next five
TOTAL_RESERVED = "Total Reserved"
BYTES = "Bytes"
DEVICE_ID = "Device Id"
DEVICE_TYPE = "Device Type"
ADDR = "Addr"

TOP_KEYS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "s", "args")
ARGS_KEYS = (
    EXTERNAL_ID,
    EXTERNAL_ID_2021,
    CORRELATION,
    STREAM,
    DEVICE,
    INPUT_DIMS,
    INPUT_TYPE,
    COLLECTIVE,
    PG_NAME,
    TOTAL_ALLOCATED,
    TOTAL_RESERVED,
    BYTES,
    DEVICE_ID,
    DEVICE_TYPE,
    ADDR,
)

_INT64 = range(-(2**63), 2**63)


def _int(v: Any) -> int | None:
    """An id, index or count as int64; None where it is not an integer one (as where it is absent)."""
    if isinstance(v, bool) or v is None:
        return None
    if not isinstance(v, int):
        try:
            v = int(str(v).strip(), 0)
        except ValueError:
            return None
    return v if v in _INT64 else None


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def shapes_text(dims: Any) -> str | None:
    """Kineto `Input Dims` ([[8,32,64],[],[[3]]]) → msprof style `8,32,64;;3`."""
    if not isinstance(dims, list):
        return None

    def one(d: Any) -> str:
        if isinstance(d, list):
            flat: list[str] = []
            for x in d:
                flat.append(one(x) if isinstance(x, list) else str(x))
            return ",".join(flat)
        return "" if d is None else str(d)

    return ";".join(one(d) for d in dims)


def _types_text(value: Any) -> str | None:
    """Kineto `Input type` (["float", "", "Scalar"]) → `float;;Scalar`."""
    return ";".join(map(str, value)) if isinstance(value, list) else None


def _memory_device(a: Any) -> str:
    """Device of a `[memory]` event from its c10 device type and index (`a.device_type`, `a.device_id`)."""
    kind = classify.MEMORY_DEVICE_TYPES.get(_int(a.device_type) or 0, f"dev{a.device_type}-")
    dev_id = _int(a.device_id)
    return "host" if kind == "host" else f"{kind}{dev_id if dev_id is not None and dev_id >= 0 else 0}"
