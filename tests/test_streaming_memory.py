"""An import streams: it succeeds in a process whose memory is capped below what loading the whole
trace would need, and loading the whole trace (json.load) under the same cap fails.

The cap is `RLIMIT_DATA` (the data segment plus private writable mappings), set in the child
before it starts. `RLIMIT_AS` would count every reservation of address space (DuckDB's and
pyarrow's allocators reserve gigabytes they never touch) and prove nothing about memory used.
`RLIMIT_DATA` counts some reservations too, so the child runs with three settings that keep
them near what is used, none of which changes how an import reads its input:

* `RLIMIT_STACK` of 2 MB: glibc sizes each thread's stack from it at start-up (8 MB by default;
  an import runs ~15 threads: DuckDB's, Arrow's pools, the writers);
* `ARROW_DEFAULT_MEMORY_POOL=system`: pyarrow's default allocator (mimalloc) reserves a 1 GiB
  arena on its first allocation;
* `MALLOC_ARENA_MAX=2`: glibc's malloc creates up to 8 arenas per core otherwise.

Sizes, measured on the project's 2-core VM: `json.load` of a 200 MB synthetic Kineto trace peaks
at ~860 MB; under these settings an import needs ~500 MB of data segment (it fails at 460 MB),
about as much as for 150 MB: the interpreter, DuckDB, pyarrow, polars and the import's bounded
buffers. The cap, 576 MB, is 1.5x below the former and ~75 MB above the latter. The trace takes
~5 s to write (`benchmarks/gen_kineto.py`) and 5-8 s to import here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA semantics are Linux's")

TRACE_MB = 200
LIMIT_MB = 576
PATTERNS = {ph: b'"ph": "' + ph + b'"' for ph in (b"X", b"s", b"f", b"i", b"M")}
PATTERNS[b"Trace"] = b'"cat": "Trace"'  # the span Kineto adds for the profiler itself: not a slice

IMPORT = """
import json, os, sys
os.cpu_count = lambda: 2  # DuckDB's threads (see run_capped)
import prof_engine
prof_engine.import_trace([sys.argv[1]], sys.argv[2])
m = json.load(open(sys.argv[2] + "/manifest.json"))
print(json.dumps({"tables": m["tables"], "events": m["sources"][0]["events"], "steps": len(m["steps"])}))
"""

LOAD = """
import json, sys
try:
    with open(sys.argv[1]) as f:
        json.load(f)
except MemoryError:
    print("MemoryError")
else:
    print("loaded")
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> tuple[Path, dict]:
    """A synthetic Kineto trace of ~200 MB and what the generator says it wrote."""
    spec = importlib.util.spec_from_file_location("gen_kineto", REPO / "benchmarks" / "gen_kineto.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen  # its dataclasses look their module up while it loads
    spec.loader.exec_module(gen)
    path = tmp_path_factory.mktemp("streaming") / "rank0.pt.trace.json"
    return path, gen.write_trace(path, TRACE_MB)


def run_capped(code: str, *args: str) -> subprocess.CompletedProcess:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (2 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))
        resource.setrlimit(resource.RLIMIT_DATA, (LIMIT_MB << 20, LIMIT_MB << 20))

    # Thread pools sized by the cores reserve memory per thread that the cap counts (stacks, buffers):
    # OpenBLAS's (numpy's, loaded with pyarrow) alone passed it on 16 cores. The test proves
    # streaming, so it runs its pools as on CI's 2 cores. (DuckDB's asynchronous I/O threads, four
    # per core, are sized with its workers by `duckdb_connect`: 65 threads on 16 cores before.)
    env = {
        **os.environ,
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        "MALLOC_ARENA_MAX": "2",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "2",
    }
    return subprocess.run(
        [sys.executable, "-c", code, *args], preexec_fn=cap, env=env, capture_output=True, text=True, timeout=300
    )


def counts(path: Path) -> dict[bytes, int]:
    """Events per `ph` (and profiler spans) in a file the generator wrote, read in chunks cut at
    line ends (the generator writes `"ph": "X"` and `"cat": "Trace"` within one line)."""
    found = dict.fromkeys(PATTERNS, 0)
    rest = b""
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            text = rest + chunk
            cut = text.rfind(b"\n") + 1
            rest = text[cut:]
            for key, pattern in PATTERNS.items():
                found[key] += text[:cut].count(pattern)
    for key, pattern in PATTERNS.items():
        found[key] += rest.count(pattern)
    return found


def test_import_streams_under_a_memory_cap(trace, tmp_path):
    path, stats = trace
    proc = run_capped(IMPORT, str(path), str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    n = counts(path)
    assert run["events"] == stats["events"] == sum(n[ph] for ph in (b"X", b"s", b"f", b"i", b"M"))
    assert run["steps"] == stats["steps"]
    assert run["tables"]["slices"] == n[b"X"] - n[b"Trace"]
    assert run["tables"]["flows"] == n[b"s"] + n[b"f"]
    assert run["tables"]["memory_events"] + run["tables"]["marks"] == n[b"i"]


def test_loading_the_whole_trace_fails_under_the_same_cap(trace):
    path, _ = trace
    proc = run_capped(LOAD, str(path))
    assert proc.stdout.strip() == "MemoryError", (proc.returncode, proc.stdout, proc.stderr[-2000:])
