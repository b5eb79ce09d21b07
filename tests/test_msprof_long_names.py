"""msprof timelines whose events carry long names (kilobytes: fused-op scopes, long `args`) import in
time linear in their size, whatever the names' length, and every record is right.

SYNTHETIC DATA: `benchmarks/msprof_names.py` writes the PROF_* directories (legacy
`device_0/timeline/msprof_0_1_1.json` and modern `mindstudio_profiler_output/msprof_<ts>.json`);
what the tests expect is read back from the generated JSON with the standard library.
The op type of a legacy kernel was found by a regex search that backtracks quadratically in the
length of a name with no `-op<N>` suffix: 1 MB/s at 2 KB names, 0.1 MB/s at 8 KB.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

import prof_engine
from prof_engine.importers import msprof, msprof_output

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("msprof_names", REPO / "benchmarks" / "msprof_names.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    return gen


gen = _generator()


def _convert_cpu_s(unit: Path, layout: str) -> float:
    """CPU seconds of converting one unit to record batches (the store's fixed costs left out: they
    would hide how conversion grows), best of two."""
    convert = msprof.convert_device_dir if layout == "legacy" else msprof_output.convert
    best = float("inf")
    for _ in range(2):
        t = time.process_time()
        convert(unit, 0, lambda table, batch: None, lambda n: None)
        best = min(best, time.process_time() - t)
    return best


@pytest.mark.parametrize("layout", gen.LAYOUTS)
def test_time_grows_with_size_not_with_name_length(tmp_path, layout):
    """Names 16x longer at the same size cost no more per MB; twice the size costs about twice the
    time (the former search took ~60x longer per MB at 8 KB names than at 512 B)."""
    times = {}
    for mb, name_bytes in ((1, 512), (1, 8192), (2, 8192)):
        unit, _, _ = gen.write_prof_dir(tmp_path / f"{mb}-{name_bytes}", mb, layout, name_bytes)
        times[mb, name_bytes] = _convert_cpu_s(unit, layout)
    assert times[1, 8192] < 2 * times[1, 512], times
    assert times[2, 8192] < 3 * times[1, 8192] + 0.02, times  # + timer noise of a few ms


def _raw_records(timeline: Path) -> tuple[list[dict], list[dict]]:
    """(device tasks, CANN API calls) of a generated timeline, by its lanes' pids."""
    events = json.loads(timeline.read_text(encoding="utf-8"), parse_float=Decimal)  # µs exactly as written
    lanes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    x = [e for e in events if e["ph"] == "X" and e.get("cat") != "Iteration Time"]
    return ([e for e in x if lanes[e["pid"]] == "Ascend Hardware"], [e for e in x if lanes[e["pid"]] == "CANN"])


@pytest.mark.parametrize("layout", gen.LAYOUTS)
def test_long_names_import_whole_and_right(tmp_path, layout):
    """Every task and API call of a 1 MB timeline of 4 KB names: counts, names byte for byte,
    op types (legacy: the node type of a `…/<Fused>-op<N>` name, none for GE's fusion names),
    start times (µs text → ns; legacy: moved by start_info's clock offset)."""
    unit, timeline, wrote = gen.write_prof_dir(tmp_path / "prof", 1, layout, 4096)
    tasks, apis = _raw_records(timeline)
    assert len(tasks) == len(wrote["tasks"]) > 100 and len(apis) == wrote["apis"]
    offset = (gen.EPOCH_US - gen.MONO_US) * 1000 if layout == "legacy" else 0
    want_ts = sorted(int(Decimal(e["ts"]) * 1000) + offset for e in tasks)
    with prof_engine.open(prof_engine.import_trace([unit], tmp_path / "run")) as run:
        got = run.sql(
            "SELECT name, op_type, ts FROM slices WHERE device = 'npu0' AND kind <> 'step' AND pid = '3' ORDER BY ts"
        ).rows()
        n_api = run.sql("SELECT count(*) FROM slices WHERE kind = 'api'").rows()[0][0]
    assert len(got) == len(tasks)
    assert sorted(name for name, _, _ in got) == sorted(e["name"] for e in tasks)
    assert [ts for _, _, ts in got] == want_ts
    if layout == "legacy":
        assert {name: op for name, op, _ in got} == wrote["tasks"]
        assert sum(op is not None for op in wrote["tasks"].values()) > 30
    assert n_api == len(apis)


@pytest.mark.parametrize(
    "name, want",
    [
        ("Default/network-WithLossCell/_backbone-AlexNet/Cast-op239", "Cast"),
        ("Default/Conv2D-op12_3", "Conv2D"),
        ("x/1_2abc-op5", "abc"),  # the type starts at a letter
        ("a-op-op5", "op"),
        ("Add-op5\n", "Add"),
        ("trans_TransData_0_Cast_1", None),
        ("Cast-op", None),
        ("Cast-op12-x", None),
        ("Scope-op3/Cast", None),  # only the last path segment names the node
        ("-op5", None),
    ],
)
def test_node_type(name, want):
    assert msprof._node_type(name) == want
