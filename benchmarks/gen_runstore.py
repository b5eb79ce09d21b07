"""Generate a large synthetic run store directly as Parquet, for benchmarks of the views.

Importing a JSON trace of 10 M device records would take ~9 GB of JSON and an hour; this writes
the run store itself with DuckDB (`range()` and arithmetic), through prof-engine's own partition
writer (`store.builder.copy_tables`, `summarise`), so the layout and file schemas are exactly an
import's: `<table>/rank=<r>/device=<d>/part-*.parquet` (the step a column) plus `manifest.json`.

The model: `ranks` ranks of a data-parallel transformer training job, one GPU each (`gpu<rank>`),
`steps` steps of `blocks` layers each. A layer is a fixed op tree (`BLOCK`): forward ops on the
main thread, backward ops on the autograd thread, each launching op calling `cudaLaunchKernel` /
`cudaMemcpyAsync` / `cudaMemsetAsync` (plus non-launching runtime calls), and 22 device records:
GEMMs, flash attention, layer norm, element-wise kernels, a DtoD memcpy and a memset on stream 7,
an HtoD prefetch on stream 13 and a bucket all-reduce (NCCL, stream 40, with its `comm` row) that
overlaps the backward GEMMs. The GPU is the bottleneck: device work is serialised per stream after
its launch, and each step ends with the host waiting in `cudaStreamSynchronize`. Durations carry a
deterministic jitter (a multiplicative hash of the record id), shrinking only, so nesting and
stream order hold. Every link the finaliser computes is filled in the same way it would be: step
(host: the step range; device: the launching op's), depth / parent_id / self_dur of host ops and
API calls, launch_id (the op whose External id the kernel carries), `ac2g` flows.

`verify()` checks that claim: at a small size it stages the same records with the derived columns
left NULL, runs prof-engine's `queries/store/finalize.sql` over them, and compares every column.

    python benchmarks/gen_runstore.py -o /tmp/run10m                       # ~10 M device records
    python benchmarks/gen_runstore.py -o /tmp/small --device-records 200000 --ranks 2 --steps 10
    python benchmarks/gen_runstore.py --verify
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from prof_engine.importers.chrome import FINALIZED  # what finalize.sql derives (slices)

EPOCH_NS = 1_790_000_000_000_000_000
RANK_SKEW_NS = 7_919  # ranks' clocks are not aligned to the ns
STEP_PREP_NS = 40_000  # host step start -> first op of the step
STEP_TAIL_NS = 20_000  # device idle -> host step end
STEP_GAP_NS = 15_000  # between two host steps
COMPUTE, NCCL, COPY = 7, 40, 13  # streams
LAUNCH_LATENCY_NS = 4_000  # a launch reaches the device no earlier than this after its API call starts
CBID = {
    "cudaLaunchKernel": 211,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaFuncSetAttribute": 273,
    "cudaStreamIsCapturing": 317,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
    "cudaStreamSynchronize": 131,
}
API_US = {
    "cudaLaunchKernel": 5,
    "cudaMemcpyAsync": 9,
    "cudaMemsetAsync": 5,
    "cudaFuncSetAttribute": 2,
    "cudaStreamIsCapturing": 1,
    "cudaEventRecord": 3,
    "cudaStreamWaitEvent": 2,
}


# -- the layer: one op tree, replayed `blocks` times per step -----------------------------------------
@dataclass(frozen=True)
class Dev:
    kind: str  # kernel, memcpy, memset, comm
    name: str
    us: int  # duration before jitter
    stream: int = COMPUTE


@dataclass(frozen=True)
class Api:
    name: str
    launch: Dev | None = None


@dataclass(frozen=True)
class Op:
    name: str
    children: tuple = ()
    shapes: str | None = None
    types: str | None = None


def _k(name: str, us: int, stream: int = COMPUTE) -> Api:
    return Api("cudaLaunchKernel", Dev("comm" if stream == NCCL else "kernel", name, us, stream))


GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_tensor16x8x16_kernel"
GEMM_NN = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_stage4_warpsize2x2x1_tensor16x8x16_kernel"
LN = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
ELEM = "void at::native::vectorized_elementwise_kernel<4, at::native::{}<c10::BFloat16>, at::detail::Array<char*, 3> >"
FLASH = "void pytorch_flash::flash_{}_kernel<Flash_{}_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>, true>(pytorch_flash::Flash_{}_params)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ACT, W = "16,2048,4096", "4096,4096"


def _linear(out_us: int, shapes: str) -> Op:
    return Op(
        "aten::linear",
        (
            Op("aten::t", (), W, "c10::BFloat16"),
            Op("aten::addmm", (_k(GEMM, out_us),), shapes, "c10::BFloat16;c10::BFloat16;c10::BFloat16"),
        ),
        shapes,
        "c10::BFloat16;c10::BFloat16;c10::BFloat16",
    )


def _mm_backward(us: int) -> Op:
    return Op(
        "autograd::engine::evaluate_function: MmBackward0",
        (
            Op(
                "MmBackward0",
                (
                    Op("aten::mm", (_k(GEMM_NN, us),), f"{ACT};{W}", "c10::BFloat16;c10::BFloat16"),
                    Op("aten::mm", (_k(GEMM, us),), f"{W};{ACT}", "c10::BFloat16;c10::BFloat16"),
                ),
            ),
        ),
    )


BF16_2 = "c10::BFloat16;c10::BFloat16"
FORWARD = (
    Op("aten::layer_norm", (Op("aten::native_layer_norm", (_k(LN, 30),), f"{ACT};4096;4096", "c10::BFloat16;;"),), ACT),
    _linear(240, f"12288;{ACT};12288,4096"),
    Op(
        "aten::scaled_dot_product_attention",
        (
            Op(
                "aten::_scaled_dot_product_flash_attention",
                (
                    Op(
                        "aten::_flash_attention_forward",
                        (Api("cudaFuncSetAttribute"), _k(FLASH.format("fwd", "fwd", "fwd"), 420)),
                    ),
                ),
                "16,32,2048,128;16,32,2048,128;16,32,2048,128",
                "c10::BFloat16;c10::BFloat16;c10::BFloat16",
            ),
        ),
    ),
    _linear(110, f"4096;{ACT};4096,4096"),
    Op("aten::add", (_k(ELEM.format("CUDAFunctor_add"), 20),), f"{ACT};{ACT}", BF16_2),
    Op("aten::layer_norm", (Op("aten::native_layer_norm", (_k(LN, 30),), f"{ACT};4096;4096", "c10::BFloat16;;"),), ACT),
    _linear(430, f"16384;{ACT};16384,4096"),
    Op("aten::gelu", (_k(ELEM.format("GeluCUDAKernelImpl"), 60),), "16,2048,16384", "c10::BFloat16"),
    _linear(430, "4096;16,2048,16384;4096,16384"),
    Op("aten::add", (_k(ELEM.format("CUDAFunctor_add"), 20),), f"{ACT};{ACT}", BF16_2),
    Op(
        "aten::copy_",
        (Api("cudaStreamIsCapturing"), Api("cudaMemcpyAsync", Dev("memcpy", "Memcpy DtoD (Device -> Device)", 15))),
        f"{ACT};{ACT}",
        BF16_2,
    ),
    Op(
        "aten::zero_",
        (Op("aten::fill_", (Api("cudaMemsetAsync", Dev("memset", "Memset (Device)", 3)),), "4096", "c10::BFloat16"),),
        "4096",
        "c10::BFloat16",
    ),
)
BACKWARD = (
    _mm_backward(430),
    Op(
        "autograd::engine::evaluate_function: GeluBackward0",
        (
            Op(
                "GeluBackward0",
                (
                    Op(
                        "aten::gelu_backward",
                        (_k(ELEM.format("GeluBackwardCUDAKernelImpl"), 70),),
                        "16,2048,16384;16,2048,16384",
                        BF16_2,
                    ),
                ),
            ),
        ),
    ),
    Op(
        "record_param_comms",
        (Api("cudaEventRecord"), Api("cudaStreamWaitEvent"), _k(ALLREDUCE, 1800, NCCL)),
        "67108864",
        "c10::BFloat16",
    ),
    _mm_backward(430),
    Op(
        "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
        (
            Op(
                "aten::_flash_attention_backward",
                (
                    Api("cudaFuncSetAttribute"),
                    _k(FLASH.format("bwd_dot_do_o", "bwd", "bwd"), 40),
                    _k(FLASH.format("bwd", "bwd", "bwd"), 900),
                    _k(FLASH.format("bwd_convert_dq", "bwd", "bwd"), 25),
                ),
            ),
        ),
    ),
    Op(
        "aten::to",
        (
            Op(
                "aten::_to_copy",
                (
                    Op(
                        "aten::copy_",
                        (Api("cudaMemcpyAsync", Dev("memcpy", "Memcpy HtoD (Pinned -> Device)", 200, COPY)),),
                        f"{ACT};{ACT}",
                        BF16_2,
                    ),
                ),
            ),
        ),
        ACT,
        "c10::BFloat16",
    ),
)


@dataclass
class Program:
    """One layer flattened: host rows and device rows with times relative to the layer's start."""

    host: list[dict]
    dev: list[dict]
    host_ns: int  # host time of one layer
    dev_ns: int  # device time of one layer (>= host_ns: the GPU is the bottleneck)


def flatten() -> Program:
    host: list[dict] = []
    dev: list[dict] = []
    clock = [0]
    stream_free = {COMPUTE: 0, NCCL: 0, COPY: 0}

    def visit(node, thread: int, depth: int, parent: int | None, op: int | None) -> None:
        local = len(host)
        row = {
            "local": local,
            "thread": thread,
            "depth": depth,
            "parent": parent,
            "name": node.name,
            "ts": clock[0],
            "shapes": None,
            "types": None,
            "launches": False,
        }
        host.append(row)
        if isinstance(node, Api):
            dur = API_US[node.name] * 1000
            row.update(kind="api", ext=op, dur=dur, slack=dur * 4 // 10)  # an API call may be 40 % faster
            if node.launch is not None:
                d = node.launch
                start = max(clock[0] + LAUNCH_LATENCY_NS, stream_free[d.stream] + 1_000)
                if d.stream == NCCL:  # cudaStreamWaitEvent: the all-reduce waits for the gradients
                    start = max(start, stream_free[COMPUTE] + 1_000)
                stream_free[d.stream] = start + d.us * 1000
                dev.append(
                    {
                        "local": None,
                        "kind": d.kind,
                        "name": d.name,
                        "stream": d.stream,
                        "ts": start,
                        "dur": d.us * 1000,
                        "api": local,
                        "op": op,
                    }
                )
                row["launches"] = True
            clock[0] += dur + 500
            return
        row.update(kind="host_op", ext=local, shapes=node.shapes, types=node.types)
        clock[0] += 3_000
        for child in node.children:
            visit(child, thread, depth + 1, local, local)
        clock[0] += 2_000  # the op's tail; jitter may take up to all of it
        row.update(dur=clock[0] - row["ts"], slack=2_000)
        clock[0] += 1_000

    for node in FORWARD:
        visit(node, 0, 0, None, None)
    for node in BACKWARD:
        visit(node, 1, 0, None, None)
    for i, d in enumerate(dev):
        d["local"] = len(host) + i
    dev_ns = max(stream_free.values()) + 1_000
    return Program(host, dev, clock[0], max(dev_ns, clock[0]))


# -- the run store ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    device_records: int = 10_000_000
    ranks: int = 8
    steps: int = 100

    def blocks(self, prog: Program) -> int:
        return max(1, round(self.device_records / (self.ranks * self.steps * len(prog.dev))))


TAIL = ("aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize")  # per step, after the layers


def define(con, shape: Shape, lanes_file: Path) -> dict:
    """Create `final_<table>` views of the synthetic run on `con` (the builder's `copy_tables` input);
    the lane pass writes its lanes to `lanes_file`."""
    prog = flatten()
    B = shape.blocks(prog)
    E = len(prog.host) + len(prog.dev)
    per_step = 1 + len(TAIL) + B * E  # ids per (rank, step): the step, its tail, its layers
    step_ns = STEP_PREP_NS + B * prog.dev_ns + STEP_TAIL_NS
    period = step_ns + STEP_GAP_NS
    p = {
        "R": shape.ranks,
        "S": shape.steps,
        "B": B,
        "E": E,
        "PER_STEP": per_step,
        "EPOCH": EPOCH_NS,
        "SKEW": RANK_SKEW_NS,
        "PERIOD": period,
        "PREP": STEP_PREP_NS,
        "HOST_NS": prog.host_ns,
        "DEV_NS": prog.dev_ns,
        "STEP_NS": step_ns,
        "RANKS_TEXT": "[" + ", ".join(map(str, range(shape.ranks))) + "]",
    }
    con.execute(
        "CREATE OR REPLACE TEMP TABLE prog_host (local INT, thread INT, kind VARCHAR, name VARCHAR, depth INT, "
        "parent INT, ext INT, ts BIGINT, dur BIGINT, slack BIGINT, shapes VARCHAR, types VARCHAR, launches BOOL)"
    )
    con.executemany(
        "INSERT INTO prog_host VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            [
                h["local"],
                h["thread"],
                h["kind"],
                h["name"],
                h["depth"],
                h["parent"],
                h["ext"],
                h["ts"],
                h["dur"],
                h["slack"],
                h["shapes"],
                h["types"],
                h["launches"],
            ]
            for h in prog.host
        ],
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE prog_dev (local INT, kind VARCHAR, name VARCHAR, stream BIGINT, ts BIGINT, "
        "dur BIGINT, api INT, op INT)"
    )
    con.executemany(
        "INSERT INTO prog_dev VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [[d["local"], d["kind"], d["name"], d["stream"], d["ts"], d["dur"], d["api"], d["op"]] for d in prog.dev],
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cbid AS SELECT * FROM (VALUES "
        + ", ".join(f"('{k}', {v})" for k, v in CBID.items())
        + ") t(name, cbid)"
    )
    sql = SQL
    for k, v in sorted(p.items(), key=lambda kv: -len(kv[0])):
        sql = sql.replace(f"${k}", str(v))
    from prof_engine._resources import data_dir
    from prof_engine.store.builder import FINALIZE_MACROS
    from prof_engine.store.lane_pass import lane_pass

    for name in FINALIZE_MACROS:  # step_lanes, as in finalize.sql
        con.execute((data_dir("queries") / name).read_text())
    before, after = sql.split("-- LANE PASS --")
    con.execute(before)
    lane_pass(con, lanes_file)  # the import's own lane pass: `_lanes`
    con.execute("CREATE OR REPLACE TEMP TABLE gen_lanes AS SELECT * FROM _lanes")
    con.execute("DROP VIEW _lanes; DROP VIEW _lane_activity")  # names finalize.sql uses for its own
    con.execute(after)
    return {**p, "device_records": shape.ranks * shape.steps * B * len(prog.dev)}


# Record ids: per (rank, step) a range of $PER_STEP ids: the step slice, the step's tail ops, then
# $E per layer (host rows, then device rows, in program order). jit(id) in [0, 1000) is the
# deterministic jitter; a duration shrinks by up to its slack (host) or 15 % (device).
SQL = r"""
CREATE OR REPLACE MACRO jit(id) AS (id * 2654435761) % 1000;
CREATE OR REPLACE MACRO step_start(rank, step) AS $EPOCH + rank * $SKEW + (step - 1) * $PERIOD;
CREATE OR REPLACE MACRO host_pid(rank) AS (3100000 + rank * 10)::VARCHAR;

CREATE OR REPLACE TEMP VIEW layers AS
SELECT range // ($S * $B) AS rank, (range // $B) % $S + 1 AS step, range % $B AS b,
       ((range // ($S * $B)) * $S + (range // $B) % $S) * $PER_STEP + 1 + 4 + (range % $B) * $E AS base
FROM range($R * $S * $B);

CREATE OR REPLACE TEMP VIEW gen_host AS
SELECT l.base + h.local AS id, l.rank, l.step, h.kind, h.name, h.thread, h.depth,
       CASE WHEN h.parent IS NOT NULL THEN l.base + h.parent END AS parent_id, l.base + h.ext AS ext,
       step_start(l.rank, l.step) + $PREP + l.b * $HOST_NS + h.ts AS ts,
       h.dur - h.slack * jit(l.base + h.local) // 1000 AS dur, h.shapes, h.types, h.launches
FROM layers l, prog_host h;

CREATE OR REPLACE TEMP VIEW gen_dev AS
SELECT l.base + d.local AS id, l.rank, l.step, d.kind, d.name, d.stream,
       step_start(l.rank, l.step) + $PREP + l.b * $DEV_NS + d.ts AS ts,
       d.dur - d.dur * 15 * jit(l.base + d.local) // 100000 AS dur,
       l.base + d.api AS correlation, l.base + d.op AS launch_id,
       h.name AS launch_name, h.shapes, h.types,  -- finalize.sql copies them from the launcher
       -- ... and the launching API call's name, start and duration (its id is the correlation)
       a.name AS launch_api, step_start(l.rank, l.step) + $PREP + l.b * $HOST_NS + a.ts AS launch_api_ts,
       a.dur - a.slack * jit(l.base + a.local) // 1000 AS launch_api_dur
FROM layers l, prog_dev d LEFT JOIN prog_host h ON h.local = d.op LEFT JOIN prog_host a ON a.local = d.api;

-- per step: the step slice, and the host waiting for the device at its end
CREATE OR REPLACE TEMP VIEW gen_steps AS
WITH s AS (
    SELECT range // $S AS rank, range % $S + 1 AS step, range * $PER_STEP + 1 AS base,
           step_start(range // $S, range % $S + 1) AS t0,
           step_start(range // $S, range % $S + 1) + $PREP + ($B - 1) * $HOST_NS + $HOST_NS AS wait_from
    FROM range($R * $S)
)
SELECT base AS id, rank, step, 'step' AS kind, 'ProfilerStep#' || step AS name, 0 AS thread, NULL::INT AS depth,
       NULL::BIGINT AS parent_id, base AS ext, t0 AS ts, $STEP_NS AS dur
FROM s
UNION ALL
SELECT base + 1, rank, step, 'host_op', 'aten::item', 0, 0, NULL, base + 1, wait_from, t0 + $STEP_NS - 2000 - wait_from FROM s
UNION ALL
SELECT base + 2, rank, step, 'host_op', 'aten::_local_scalar_dense', 0, 1, base + 1, base + 2, wait_from + 2000,
       t0 + $STEP_NS - 6000 - wait_from FROM s
UNION ALL
SELECT base + 3, rank, step, 'api', 'cudaStreamSynchronize', 0, 2, base + 2, base + 2, wait_from + 4000,
       t0 + $STEP_NS - 10000 - wait_from FROM s;

CREATE OR REPLACE TEMP VIEW gen_host_all AS
SELECT id, rank, step, kind, name, thread, depth, parent_id, ext, ts, dur, shapes, types, launches FROM gen_host
UNION ALL
SELECT id, rank, step, kind, name, thread, depth, parent_id, ext, ts, dur, NULL, NULL, false FROM gen_steps;

-- self time of a host op: its duration minus its direct child ops' (API calls are not ops)
CREATE OR REPLACE TEMP VIEW gen_child_time AS
SELECT parent_id AS id, sum(dur) AS child_dur FROM gen_host_all WHERE kind = 'host_op' AND parent_id IS NOT NULL GROUP BY ALL;

CREATE OR REPLACE TEMP VIEW final_slices AS
SELECT h.id, h.rank::INTEGER AS rank, 'host' AS device, h.step, h.kind, h.name,
       CASE h.kind WHEN 'api' THEN 'cuda_runtime' WHEN 'step' THEN 'user_annotation' ELSE 'cpu_op' END AS category,
       NULL::VARCHAR AS op_type, NULL::VARCHAR AS task_type, h.ts, h.dur,
       host_pid(h.rank) AS pid, (host_pid(h.rank)::BIGINT + 7 * h.thread)::VARCHAR AS tid, NULL::BIGINT AS stream,
       CASE WHEN h.kind = 'api' THEN h.id END AS correlation, h.ext AS external_id,
       h.depth, h.parent_id,
       -- finalize.sql's expression, so that the writer stores it as it stores an import's
       CASE WHEN h.kind = 'host_op' THEN greatest(h.dur - coalesce(c.child_dur, 0), 0) END AS self_dur,
       NULL::BIGINT AS launch_id, NULL::VARCHAR AS launch_name, NULL::BIGINT AS wait, NULL::VARCHAR AS launch_api,
       NULL::BIGINT AS launch_api_ts, NULL::BIGINT AS launch_api_dur, h.shapes AS input_shapes, h.types AS input_types,
       CASE WHEN h.kind = 'api'
            THEN printf('{"External id": %d, "cbid": %d, "correlation": %d}', h.ext, cb.cbid, h.id)
            ELSE printf('{"External id": %d, "Record function id": %d}', h.ext, h.ext) END AS args
FROM gen_host_all h LEFT JOIN gen_child_time c ON c.id = h.id LEFT JOIN cbid cb ON cb.name = h.name
UNION ALL
SELECT d.id, d.rank::INTEGER, 'gpu' || d.rank, d.step, d.kind, d.name,
       CASE d.kind WHEN 'memcpy' THEN 'gpu_memcpy' WHEN 'memset' THEN 'gpu_memset' ELSE 'kernel' END,
       NULL, NULL, d.ts, d.dur, d.rank::VARCHAR, d.stream::VARCHAR, d.stream, d.correlation, d.launch_id,
       NULL, NULL, NULL, d.launch_id, d.launch_name, d.wait, d.launch_api, d.launch_api_ts, d.launch_api_dur,
       d.shapes, d.types,
       CASE WHEN d.kind IN ('memcpy', 'memset')
            THEN printf('{"External id": %d, "device": %d, "context": 1, "stream": %d, "correlation": %d, "bytes": %d}',
                        d.launch_id, d.rank, d.stream, d.correlation, 134217728)
            ELSE printf('{"External id": %d, "queued": 0, "device": %d, "context": 1, "stream": %d, "correlation": %d, '
                        || '"registers per thread": 168, "shared memory": 98304, "grid": [%d, 1, 1], "block": [256, 1, 1]%s}',
                        d.launch_id, d.rank, d.stream, d.correlation, 132 + d.id % 7,
                        CASE WHEN d.kind = 'comm' THEN ', "Collective name": "allreduce", "In msg nelems": 67108864, '
                             || '"Out msg nelems": 67108864, "Group size": $R, "dtype": "BFloat16", "Process Group Name": "0", '
                             || '"Process Group Description": "default_pg", "Process Group Ranks": "$RANKS_TEXT"' ELSE '' END)
            END
FROM (SELECT *, stream_wait(rank, 0, stream, ts, dur, id) AS wait FROM gen_dev) d;  -- a rank has one GPU

CREATE OR REPLACE TEMP VIEW final_comm AS
SELECT id AS slice_id, rank::INTEGER AS rank, 'gpu' || rank AS device, step, 'allreduce' AS collective, '0' AS group_name,
       'default_pg' AS group_desc, '$RANKS_TEXT' AS group_ranks, $R::INTEGER AS group_size, 'BFloat16' AS dtype,
       67108864::BIGINT AS in_nelems, 67108864::BIGINT AS out_nelems, 134217728::BIGINT AS bytes,
       NULL::INTEGER AS src_rank, NULL::INTEGER AS dst_rank, NULL::VARCHAR AS transport
FROM gen_dev WHERE kind = 'comm';

-- the step breakdown's lanes and the lanes' intervals, with the macros finalize.sql uses (no
-- receive ops in this job)
CREATE OR REPLACE TEMP VIEW gen_lane_activity AS
SELECT rank::INTEGER AS rank, 'gpu' || rank AS device, step,
       CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END AS type, ts AS s, ts + dur AS e
FROM gen_dev WHERE kind IN ('kernel', 'comm');
CREATE OR REPLACE TEMP VIEW gen_lane_receives AS
SELECT 0::INTEGER AS rank, ''::VARCHAR AS device, 0::BIGINT AS step, 0::BIGINT AS dur WHERE false;
CREATE OR REPLACE TEMP VIEW gen_lane_steps AS SELECT rank::INTEGER AS rank, step, ts FROM gen_steps WHERE kind = 'step';
CREATE OR REPLACE TEMP VIEW _lane_activity AS SELECT * FROM gen_lane_activity;
-- LANE PASS --
CREATE OR REPLACE TEMP VIEW final_lanes AS SELECT * FROM gen_lanes;
CREATE OR REPLACE TEMP VIEW final_lane_totals AS SELECT * FROM step_lanes('gen_lanes', 'gen_lane_receives', 'gen_lane_steps');

-- ac2g flow endpoints: s on the launching API call, f on the device record (an import files both under device host)
CREATE OR REPLACE TEMP VIEW final_flows AS
SELECT rank::INTEGER AS rank, 'host' AS device, step, 'ac2g' AS category, correlation::VARCHAR AS flow_id, phase, ts, pid, tid
FROM (
    SELECT h.rank, h.step, h.id AS correlation, 's' AS phase, h.ts, host_pid(h.rank) AS pid,
           (host_pid(h.rank)::BIGINT + 7 * h.thread)::VARCHAR AS tid
    FROM gen_host h WHERE h.launches
    UNION ALL
    SELECT rank, step, correlation, 'f', ts, rank::VARCHAR, stream::VARCHAR FROM gen_dev
);
"""

STAGED = ("step", *FINALIZED)  # what the generated slices hold that finalize.sql derives
FROM_LAUNCHER = ("input_shapes", "input_types")  # what it copies from the launcher into device records


def write(out: Path, shape: Shape, memory_limit: str = "8GB", log=print) -> dict:
    """Write the run store at `out` (atomically: built beside it, renamed into place)."""
    from prof_engine import schema
    from prof_engine.store.builder import SourceFile, copy_tables, duckdb_connect, summarise
    from prof_engine.store.files import restrict_tree, write_text
    from prof_engine.store.manifest import MANIFEST

    out = Path(out).absolute()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".generating", dir=out.parent))
    try:
        con = duckdb_connect(tmp / "_spill", memory_limit)
        (tmp / "_spill").mkdir(exist_ok=True)
        params = define(con, shape, tmp / "_spill" / "_lanes.parquet")
        t0 = time.perf_counter()
        rows = copy_tables(con, tmp, only={"slices", "comm", "flows", "lane_totals", "lanes"})
        log(f"wrote {sum(rows.values()):,} rows ({rows}) in {time.perf_counter() - t0:.1f} s")
        summary = summarise(con, tmp)
        con.close()
        shutil.rmtree(tmp / "_spill", ignore_errors=True)
        sources = [
            SourceFile(
                path=f"synthetic:gen_runstore rank {r}",
                format="kineto",
                rank=r,
                index=r,
                version="1",
                devices=[{"id": r, "name": "NVIDIA A100-SXM4-80GB"}],
            )
            for r in range(shape.ranks)
        ]
        manifest = {
            "id": uuid.uuid4().hex,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "schema_version": schema.schema_version(),
            "source": {"format": "kineto", "versions": ["1"]},
            "sources": [dataclasses.asdict(s) for s in sources],
            "ranks": list(range(shape.ranks)),
            "hosts": [],
            "tables": rows,
            "metadata": {
                "generator": "benchmarks/gen_runstore.py",
                **dataclasses.asdict(shape),
                "blocks": params["B"],
                "device_records_per_step": params["device_records"] // shape.steps,
            },
            "skipped": [],
            "derived": schema.derived(),
            **summary,
        }
        write_text(tmp / MANIFEST, json.dumps(manifest, indent=1, default=str))
        restrict_tree(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**params, "rows": rows}


def verify(shape: Shape = Shape(device_records=2_000, ranks=2, steps=3)) -> list[str]:
    """Differences between the generated records and what finalize.sql derives from them staged."""
    import duckdb

    from prof_engine import schema
    from prof_engine.store.builder import stage_views

    problems = []
    with tempfile.TemporaryDirectory() as d:
        con = duckdb.connect()
        define(con, shape, Path(d) / "_lanes.parquet")
        staging = Path(d)
        staged = ", ".join(
            "CASE WHEN kind = 'step' THEN step END AS step"
            if c.name == "step"  # an importer states a step slice's step
            else f"NULL::{c.sql_type} AS {c.name}"
            if c.name in STAGED
            else f"CASE WHEN device = 'host' THEN {c.name} END AS {c.name}"
            if c.name in FROM_LAUNCHER
            else c.name
            for c in schema.tables()["slices"].columns
        )
        for name, select in (
            ("slices", f"SELECT {staged} FROM final_slices"),
            ("flows", "SELECT * REPLACE (NULL::BIGINT AS step) FROM final_flows"),
            ("comm", "SELECT * REPLACE (NULL::VARCHAR AS device, NULL::BIGINT AS step) FROM final_comm"),
        ):
            (staging / name).mkdir()
            con.execute(f"COPY ({select}) TO '{staging / name / 'x.parquet'}' (FORMAT parquet)")
        con.execute("CREATE SCHEMA gen")
        for name in ("slices", "flows", "comm", "lane_totals", "lanes"):
            con.execute(f"CREATE TABLE gen.{name} AS SELECT * FROM final_{name}")
        stage_views(con, staging, [(r, r, 0) for r in range(shape.ranks)])
        for name in ("slices", "flows", "comm", "lane_totals", "lanes"):
            fix = " REPLACE (self_dur::DOUBLE AS self_dur)" if name == "slices" else ""
            for a, b in ((f"gen.{name}", f"final_{name}"), (f"final_{name}", f"gen.{name}")):
                n = con.execute(
                    f"SELECT count(*) FROM (SELECT *{fix} FROM {a} EXCEPT ALL SELECT *{fix} FROM {b})"
                ).fetchone()[0]
                if n:
                    problems.append(f"{name}: {n} rows of {a} not in {b}")
        con.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, help="run directory to write")
    ap.add_argument("--device-records", type=int, default=Shape.device_records)
    ap.add_argument("--ranks", type=int, default=Shape.ranks)
    ap.add_argument("--steps", type=int, default=Shape.steps)
    ap.add_argument("--memory-limit", default="8GB", help="DuckDB memory limit while writing (it spills beyond)")
    ap.add_argument("--verify", action="store_true", help="check the generator against finalize.sql at a small size")
    a = ap.parse_args(argv)
    if a.verify:
        problems = verify()
        print(
            "\n".join(problems)
            or "generated records = what finalize.sql derives from them (slices, flows, comm, lane_totals, lanes)"
        )
        return 1 if problems else 0
    if not a.out:
        ap.error("-o/--out is required (or --verify)")
    t0 = time.perf_counter()
    info = write(a.out, Shape(a.device_records, a.ranks, a.steps), a.memory_limit)
    print(
        f"wrote {a.out}: {info['device_records']:,} device records, {a.ranks} ranks x {a.steps} steps x "
        f"{info['B']} layers in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
