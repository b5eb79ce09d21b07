"""Classification of trace records, in one place and data-driven.

Which Chrome-trace category is which kind of record, which categories run on a device, and which
names are communication: importers ask here, nowhere else.
"""

from __future__ import annotations

import re

# Chrome trace `cat` → canonical `kind` (schemas/slices.toml). Unknown categories become "other".
CATEGORY_KIND: dict[str, str] = {
    "cpu_op": "host_op",
    "operator": "host_op",
    "user_annotation": "user_range",
    "python_function": "python",
    "cuda_runtime": "api",
    "cuda_driver": "api",
    "runtime": "api",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "gpu_user_annotation": "device_range",
    "cuda_sync": "sync",
}

# Categories whose records run on the device (pid = device index, tid = stream).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync"})

# Categories that describe the profiler itself, not the program: kept out of the tables.
SKIPPED_CATEGORIES = frozenset({"Trace"})

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")

# Device kernels of collective libraries (NCCL, RCCL, HCCL).
_COMM_KERNEL = re.compile(r"(^|[^a-z])(nccl|rccl|hccl|hcom_)", re.IGNORECASE)
# Host-side communication ranges: torch's record_function names for gloo/NCCL collectives.
_COMM_RANGE = re.compile(r"^(gloo|nccl):")

# c10 DeviceType numbers in `[memory]` events → device name prefix.
MEMORY_DEVICE_TYPES = {0: "host", 1: "gpu", 20: "npu"}


def kind_of(category: str | None, name: str, has_collective: bool) -> str:
    """Canonical kind of a duration record from its source category and name."""
    if STEP_NAME.match(name):
        return "step"
    kind = CATEGORY_KIND.get(category or "", "other")
    if kind == "kernel" and (has_collective or _COMM_KERNEL.search(name)):
        return "comm"
    if kind == "user_range" and _COMM_RANGE.match(name):
        return "comm"
    return kind


def step_number(name: str) -> int | None:
    m = STEP_NAME.match(name)
    return int(m.group(1)) if m else None


# Element sizes for message bytes (names as Kineto's `dtype` arg writes them).
DTYPE_BYTES = {
    "float": 4, "float32": 4, "float16": 2, "half": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int": 4, "int32": 4, "int64": 8, "long": 8, "int16": 2, "int8": 1, "uint8": 1, "char": 1,
    "byte": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
