"""The library changes nothing in its caller's process; the processes prof-engine owns tune themselves.

`import prof_engine` and its calls used to set `ARROW_DEFAULT_MEMORY_POOL`, call glibc's `mallopt`
for the rest of the process and make `import pandas` fail in every thread during an import. That
tuning now belongs to the CLI, the import workers and the collector's writer
(`prof_engine._process.tune_owned_process`). A recording with torch left `KINETO_LOG_LEVEL` set
(a level without torch, which this test recorded with, missed it). Each check runs in a fresh
interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import write_trace, x
from prof_engine._allocator import ARENA_MAX, ENV, M_ARENA_MAX, M_MMAP_THRESHOLD, MMAP_THRESHOLD

LINUX = sys.platform.startswith("linux")

LIBRARY_CALLS = """
import importlib, os, sys, threading
try:  # torch.profiler's first start sets TORCHINDUCTOR_CACHE_DIR: torch's own, as a program sees it
    import torch.profiler
    with torch.profiler.profile():
        pass
except ImportError:
    pass
env, finders = dict(os.environ), list(sys.meta_path)
import prof_engine
from prof_engine import _allocator
mallopts = []
_allocator._mallopt = lambda *a: mallopts.append(a)
out, traces = sys.argv[1], sys.argv[2:]
imported = []

def progress(done, total):  # within import_trace: another thread imports pandas
    if not imported:
        t = threading.Thread(target=lambda: imported.append(importlib.import_module("pandas").__name__))
        t.start()
        t.join()

run = prof_engine.import_trace(traces, out + "/run", jobs=2, progress=progress)
with prof_engine.open(run) as r:
    assert r.view("op_statistic").arrow().num_rows > 0
    r.export(["op_statistic"], out + "/export", fmt="csv")
prof_engine.compare(run, run).changes()
# the default level, and Level2, which starts every source a lower level does (torch, sampling, memory)
for level in (None, prof_engine.ProfilerLevel.Level2):
    with prof_engine.Profiler(out + f"/recorded-{level}", profiler_level=level,
                              schedule=prof_engine.schedule(wait=1, warmup=0, active=2)) as prof:
        for _ in range(4):
            prof_engine.mstx.mark("tick")
            prof.step()
assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
ours = [f for f in sys.meta_path if type(f).__module__.startswith("prof_engine")]  # pandas' own deps add some
assert ours == [] and all(f in sys.meta_path for f in finders), sys.meta_path
assert mallopts == [], mallopts
assert imported == ["pandas"], imported
print("untouched")
"""

CLI_PROCESS = """
import json, os, sys
from prof_engine import _allocator
mallopts = []
_allocator._mallopt = lambda *a: mallopts.append(list(a))
from prof_engine._entry import main
sys.argv = ["prof-engine", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
try:
    import pandas
    pandas_imports = True
except ModuleNotFoundError:
    pandas_imports = False
from prof_engine._process import untuned_environ
print(json.dumps({"pool": os.environ.get(_allocator.ENV), "mallopts": mallopts, "pandas": pandas_imports,
                  "program_pool": untuned_environ().get(_allocator.ENV)}))
"""


def _traces(tmp_path):
    return [
        str(
            write_trace(
                tmp_path / f"rank{r}.json",
                [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 50)],
                distributedInfo={"rank": r},
            )
        )
        for r in (0, 1)
    ]


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def _env_without_pool() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != ENV}


def test_library_calls_change_nothing_in_the_callers_process(tmp_path):
    """No environment variable, no import hook, no mallopt; pandas imports in another thread while
    import_trace runs (its workers, prof-engine's own processes, still tune themselves)."""
    pytest.importorskip("pandas")
    p = _python(LIBRARY_CALLS, str(tmp_path), *_traces(tmp_path), env=_env_without_pool())
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["untouched"]


def test_the_cli_import_process_tunes_itself(tmp_path):
    """`prof-engine import`: Arrow's jemalloc, bounded glibc heaps, no pandas; a program that
    `prof-engine collect` runs would get none of it."""
    p = _python(CLI_PROCESS, "import", *_traces(tmp_path), "-o", str(tmp_path / "run"), env=_env_without_pool())
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert (got["pool"], got["program_pool"]) == (("jemalloc", None) if LINUX else (None, None))
    assert got["mallopts"] == [[M_MMAP_THRESHOLD, MMAP_THRESHOLD], [M_ARENA_MAX, ARENA_MAX]]
    assert got["pandas"] is False


def test_other_cli_commands_only_choose_the_allocator(tmp_path):
    """`prof-engine --version` (any command but import): jemalloc, nothing else; a user's own
    choice of Arrow's allocator stands, and is passed on to a program the CLI runs."""
    p = _python(CLI_PROCESS, "--version", env=_env_without_pool())
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert got == {
        "pool": "jemalloc" if LINUX else None,
        "mallopts": [],
        "program_pool": None,
        "pandas": importlib.util.find_spec("pandas") is not None,
    }
    p = _python(CLI_PROCESS, "--version", env={**os.environ, ENV: "system"})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert (got["pool"], got["program_pool"]) == ("system", "system")
