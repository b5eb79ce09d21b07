"""Classification of trace records, in one place and data-driven.

Which Chrome-trace category is which kind of record, which categories run on a device, and which
names are communication: importers ask here, nowhere else.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TypeGuard

# Chrome trace `cat` → canonical `kind` (schemas/slices.toml), by the category in lower case:
# Kineto wrote capitalised names until mid-2021 (`Operator`, `Runtime`, `Kernel`, `Memcpy`,
# `Memset`, `Python`, `Trace`) and its ActivityType names since (libkineto ActivityType.cpp, every
# version, and the vendor forks' runtime and device names). Unknown categories become "other".
CATEGORY_KIND: dict[str, str] = {
    "cpu_op": "host_op",
    "operator": "host_op",
    "user_annotation": "user_range",
    "python_function": "python",
    "python": "python",
    # host-side runtime and driver calls of every backend (hpu_op: Gaudi's host-side runtime events)
    "cuda_runtime": "api",
    "cuda_driver": "api",
    "runtime": "api",
    "xpu_runtime": "api",
    "xpu_driver": "api",
    "mtia_runtime": "api",
    "glow_runtime": "api",
    "hpu_op": "api",
    "privateuse1_runtime": "api",
    "privateuse1_driver": "api",
    "musa_runtime": "api",
    "musa_driver": "api",
    "mlu_runtime": "api",
    "gcu_runtime": "api",
    "gcu_driver": "api",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "mlu_memcpy": "memcpy",
    "gcu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "mlu_memset": "memset",
    "gcu_memset": "memset",
    "gpu_user_annotation": "device_range",
    "mlu_user_annotation": "device_range",
    "gcu_user_annotation": "device_range",
    "cuda_sync": "sync",
    "xpu_sync": "sync",
    "gcu_sync": "sync",
    "collective_comm": "comm",
}

# Categories whose records run on the device (pid = device index, tid = stream).
DEVICE_CATEGORIES = frozenset(
    {
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "gpu_user_annotation",
        "cuda_sync",
        "memcpy",
        "memset",
        "mlu_memcpy",
        "mlu_memset",
        "mlu_user_annotation",
        "gcu_memcpy",
        "gcu_memset",
        "gcu_user_annotation",
    }
)

# Categories that describe the profiler itself, not the program: kept out of the tables.
SKIPPED_CATEGORIES = frozenset({"trace"})

# Categories Kineto writes that are no record of the program's own work (the profiler's overhead,
# counter ranges, correlation records, instants, counters): kind "other", but known, not guessed.
KNOWN_OTHER_CATEGORIES = frozenset(
    {
        "external_correlation",
        "cpu_instant_event",
        "overhead",
        "cuda_profiler_range",
        "cuda_event",
        "mtia_ccp_events",
        "mtia_insight",
        "mtia_counters",
        "mtia_workloadd",
        "xpu_scope_profiler",
        "gpu_pm_counter",
        "memory",
        "mlu_profiler_range",
        "mlu_notifier",
        "gcu_profiler_range",
    }
)
KNOWN_CATEGORIES = frozenset(CATEGORY_KIND) | SKIPPED_CATEGORIES | KNOWN_OTHER_CATEGORIES


@lru_cache(maxsize=4096)
def category_key(category: str | None) -> str:
    """The form of a category the tables above use: ASCII letters in lower case (Kineto changed
    the case in 2021), as Arrow's `ascii_lower` gives it on the native path."""
    return category.encode(errors="surrogatepass").lower().decode(errors="surrogatepass") if category else ""


def is_device_category(category: str | None) -> bool:
    return category_key(category) in DEVICE_CATEGORIES


def is_skipped_category(category: str | None) -> bool:
    return category_key(category) in SKIPPED_CATEGORIES


def is_unknown_category(category: str | None) -> TypeGuard[str]:
    """A category none of the tables above knows (no category at all is not one): its records are
    kind "other" because this build does not know what they are (a data-quality finding)."""
    return bool(category) and category_key(category) not in KNOWN_CATEGORIES


STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# A step number fits the step columns' int32 readers and is not negative; a larger one is not a
# step (its record keeps its category's kind) and is a `values_out_of_range` finding.
STEP_MAX = 2**31 - 1
# A slice outside any real run: its start 2^62 ns (146 years) or more from the file clock's zero,
# or longer than a week (no profiler records that long). Dropped, a `values_out_of_range` finding.
TS_LIMIT = 1 << 62
DUR_LIMIT = 7 * 86_400 * 10**9


def time_out_of_range(ts: int, dur: int) -> bool:
    """A record no run holds: a start `TS_LIMIT` or more from 0, or a duration over `DUR_LIMIT`."""
    return not -TS_LIMIT < ts < TS_LIMIT or dur > DUR_LIMIT


# Communication kernels by name (queries/_classify.sql lists the families and why), whatever
# launched them: a collective library's kernels, and collectives named in a kernel's name. A word
# counts at a word's start (after no letter; `All` also inside camelCase), so `small_reduce`,
# `reduce_kernel`, `splitKreduce_kernel` or `cub::DeviceReduce` stay compute.
_COMM_KERNEL = re.compile(
    r"(?<![A-Za-z])(?i:nccl|rccl|hccl|hcom_|msccl|nvshmem|deep_ep)"
    r"|(?:(?<![A-Za-z])(?i:all)|All|ALL)(?i:_?(?:reduce|gather|to_?all|2all))"
    r"|(?<![A-Za-z])(?i:reduce_?scatter)|ReduceScatter"
    r"|(?<![A-Za-z])cross_device_reduce_"
)
# Compute kernels that match the above: DeepEP's layout kernel (a local count of tokens per rank
# and expert, before any transfer), and Triton kernels, which Inductor names after the aten ops
# they fuse (`triton_poi_fused_all_gather_into_tensor_0` copies into a collective's buffer).
_COMPUTE_KERNEL = re.compile(r"deep_ep::layout::|get_dispatch_layout|^triton_")
# Host-side communication ranges: the record_function of a c10d Work (`nccl:all_reduce`,
# `gloo:broadcast`). torch marks them async, out of its call tree: kind comm, which the host pass
# does not nest (queries/store/finalize.sql step 2) and key_averages lists without self time.
_COMM_RANGE = re.compile(r"^(gloo|nccl):")

# c10 DeviceType numbers in `[memory]` events → device name prefix.
MEMORY_DEVICE_TYPES = {0: "host", 1: "gpu", 20: "npu"}


def kind_of(category: str | None, name: str, has_collective: bool) -> str:
    """Canonical kind of a duration record from its source category and name."""
    if step_number(name) is not None:
        return "step"
    kind = CATEGORY_KIND.get(category_key(category), "other")
    if kind == "kernel" and (has_collective or is_comm_kernel(name)):
        return "comm"
    if kind == "user_range" and _COMM_RANGE.match(name):
        return "comm"
    return kind


@lru_cache(maxsize=4096)
def is_comm_kernel(name: str) -> bool:
    """A device kernel whose name says communication (`_COMM_KERNEL`, less `_COMPUTE_KERNEL`)."""
    return _COMM_KERNEL.search(name) is not None and _COMPUTE_KERNEL.search(name) is None


def step_number(name: str) -> int | None:
    """N of `ProfilerStep#N`; None where the name is no step's or N is beyond `STEP_MAX`."""
    m = STEP_NAME.match(name)
    return int(m.group(1)) if m and len(m.group(1)) <= 10 and int(m.group(1)) <= STEP_MAX else None


def step_out_of_range(name: str) -> bool:
    """A step's name whose number is beyond `STEP_MAX` (its record is not a step)."""
    return STEP_NAME.match(name) is not None and step_number(name) is None


# Element sizes for message bytes (names as Kineto's `dtype` arg writes them).
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "int64": 8,
    "long": 8,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "byte": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
