"""fusion_op: the fused operators of a run (CANN's graph fusion, torch.compile's Triton kernels),
checked against the raw events of a real msprof timeline and a hand-built Kineto trace."""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal

import prof_engine
from conftest import fixture_path, load_events, write_trace, x

COLUMNS = '"Rank", "Device", "Fusion Op", "Original Ops", "Fusion Type", "Count", "Total Time(us)", "Time(%)"'


def test_graph_fusion_ops_are_the_timelines_fused_tasks(tmp_path):
    """Each device's `FusionOp_*` tasks in the msprof timeline (the op type is the last part of
    the task's scope name, less its `-opN`), counted and summed from the raw JSON."""
    src = fixture_path("ascend", "msprof_cann7_2device_timeline_legacy")
    want: dict[tuple, list] = defaultdict(lambda: [0, Decimal(0)])
    for path in src.glob("PROF_*/device_*/timeline/msprof_*.json"):
        device = f"npu{path.parent.parent.name.split('_')[1]}"
        for e in load_events(path)[1]:
            op_type = re.sub(r"-op\d+$", "", str(e.get("name", "")).rsplit("/", 1)[-1])
            if e.get("ph") == "X" and op_type.startswith("FusionOp_"):
                want[(device, op_type)][0] += 1
                want[(device, op_type)][1] += Decimal(str(e["dur"]))
    assert len(want) >= 6
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql(f"SELECT {COLUMNS} FROM fusion_op").rows()
    assert {(d, f): [n, Decimal(str(t))] for _, d, f, _, _, n, t, _ in rows} == want
    for _, _, fused, ops, kind, *_ in rows:
        assert ops == ", ".join(fused.split("_")[1:]) and kind == "graph fusion"


def test_inductor_kernels_are_fused_ops_by_their_names(tmp_path):
    """Triton kernels named by Inductor are rows, with the ops and kind their names say; other
    kernels are not, but count in each row's share of the device's kernel time."""
    events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation")]
    kernels = [
        ("triton_poi_fused_add_mul_0", 10),
        ("triton_poi_fused_add_mul_0", 30),
        ("triton_red_fused_native_layer_norm_1", 20),
        ("triton_per_fused_sum_2", 5),
        ("triton_tem_fused_addmm_relu_3", 15),
        ("sm90_xmma_gemm_bf16", 100),
        ("triton_poi_fused_", 20),
    ]
    ts = 10
    for i, (name, dur) in enumerate(kernels):
        events.append(x(name, ts, dur, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=i))
        ts += dur + 1
    with prof_engine.open(
        prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    ) as run:
        rows = run.sql(f"SELECT {COLUMNS} FROM fusion_op").rows()
    assert rows == [
        (0, "gpu0", "triton_poi_fused_add_mul_0", "add_mul", "pointwise", 2, 40.0, 20.0),
        (0, "gpu0", "triton_red_fused_native_layer_norm_1", "native_layer_norm", "reduction", 1, 20.0, 10.0),
        (0, "gpu0", "triton_tem_fused_addmm_relu_3", "addmm_relu", "template", 1, 15.0, 7.5),
        (0, "gpu0", "triton_per_fused_sum_2", "sum", "persistent reduction", 1, 5.0, 2.5),
    ]


def test_a_run_without_fused_ops_has_no_rows(tmp_path):
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("k", 10, 5, cat="kernel", pid=0, tid=7, device=0, stream=7),
    ]
    with prof_engine.open(
        prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    ) as run:
        assert run.sql("SELECT * FROM fusion_op").rows() == []
