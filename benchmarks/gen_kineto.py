"""Generate a synthetic PyTorch profiler (Kineto) GPU trace of a requested size, for benchmarks.

The trace imitates what torch.profiler writes for one rank of a DDP + NCCL training job on an
A100 (modelled on HTA's `nccl_data.json.gz`, see ../shared/reference/kineto_format.md):

* a top-level object, pretty-printed like Kineto's C++ writer, with `schemaVersion`,
  `deviceProperties`, `record_shapes`, `profile_memory`, `distributedInfo` (rank, world_size,
  pg_config), `traceEvents`, and after the events `traceName`, `displayTimeUnit` and
  `baseTimeNanoseconds`; `ts`/`dur` are µs relative to that base, floats with 3 decimals;
* per step a `ProfilerStep#N` user_annotation on the main thread holding `## forward ##`,
  `## backward ##` and `## optimizer ##` annotations and nested `cpu_op` trees (ResNet-style
  conv / batch-norm / relu blocks) with `External id`, `Record function id`, `Input Dims`,
  `Input type`, `Input Strides`, `Concrete Inputs`, and `Sequence number` on autograd ops;
* backward ops on an autograd thread, linked to the forward ops by `fwdbwd` s/f flows;
* `cuda_runtime` calls (`cudaLaunchKernel`, `cudaMemcpyAsync`, `cudaMemsetAsync` and the
  non-launching calls torch makes around them) with `correlation`; every launch has an `ac2g`
  s (on the runtime call) / f (on the GPU activity) flow pair with id = correlation;
* GPU `kernel`, `gpu_memcpy`, `gpu_memset` events (pid = device, tid = stream, args with
  stream / correlation / External id / grid / block), serialised per stream after their launch;
* DDP bucket all-reduces: `record_param_comms` cpu_ops and `ncclKernel_AllReduce_*` kernels on a
  separate stream with `Collective name`, `In msg nelems`, `dtype`, `Process Group ...` args,
  plus `gpu_user_annotation` ranges; `cpu_instant_event` `[memory]` allocator events.

Simplification: real Kineto writes all CPU events of the whole window before the GPU events; this
generator writes one block per step (main thread, autograd thread, [memory] events, GPU) so that
it never holds more than one step in memory. Output is deterministic for a given seed and rank.

    python benchmarks/gen_kineto.py --mb 100 -o /tmp/big.json [--gzip] [--rank R]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

BASE_NS = 1790857026000000000  # baseTimeNanoseconds; epoch ns = base + ts_us * 1000
START_NS = 4481797671663779  # first ts (ns relative to base) -> 4481797671663.779 µs
COMPUTE_STREAM, NCCL_STREAM = 7, 40
CBID = {
    "cudaLaunchKernel": 211,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaStreamIsCapturing": 317,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
    "cudaFuncSetAttribute": 273,
    "cudaStreamGetPriority": 203,
    "cudaDeviceGetStreamPriorityRange": 205,
    "cudaLaunchKernelExC": 430,
    "cudaStreamSynchronize": 131,
}
GPU_GROUP, MEMORY_GROUP = 9, 8  # sort groups within a step block (threads come first)


# -- the model: op trees replayed every step ----------------------------------------------------
@dataclass(frozen=True)
class Kernel:
    """A GPU activity launched by an op: kernel, memcpy or memset."""

    name: str
    dur_us: tuple[float, float]
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    regs: int = 32
    smem: int = 0
    cat: str = "kernel"
    nbytes: int = 0  # memcpy / memset size


@dataclass
class Op:
    """A cpu_op (or user_annotation) with its children, GPU launches and allocations."""

    name: str
    inputs: list = field(default_factory=list)  # [(dims, type, concrete)]
    children: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    calls: list = field(default_factory=list)  # non-launching cuda_runtime calls
    alloc: int = 0  # bytes allocated (a [memory] event)
    grad: bool = False  # forward op autograd records: Sequence number + fwdbwd 's'
    bwd_node: bool = False  # backward node: Sequence number + fwdbwd 'f', frees the layer's activations
    self_us: tuple[float, float] = (3.0, 12.0)
    cat: str = "cpu_op"
    shape_text: str = ""

    def __post_init__(self) -> None:
        if self.inputs:
            dims = [d for d, _, _ in self.inputs]
            strides = [_strides(d) for d in dims]
            self.shape_text = (
                f', "Concrete Inputs": {_j([c for _, _, c in self.inputs])}, "Input type": '
                f'{_j([t for _, t, _ in self.inputs])}, "Input Strides": {_j(strides)}, "Input Dims": {_j(dims)}'
            )


def _j(v) -> str:
    return json.dumps(v, separators=(", ", ": "))


def _strides(dims: list) -> list:
    if not dims or not isinstance(dims[0], int):
        return []
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return out[::-1]


def _t(dims: list, dtype: str = "float") -> tuple:
    return (dims, dtype, "")


def _nbytes(dims: list) -> int:
    n = 4
    for d in dims:
        n *= d
    return n


ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::{f}, at::detail::Array<char*, {n}> >"
    "(int, at::native::{f}, at::detail::Array<char*, {n}>)"
)
CONV_FPROP = (
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
    "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer"
)
CONV_WGRAD = (
    "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_"
    "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train"
)
NCHW2NHWC = (
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
    "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)"
)
NHWC2NCHW = (
    "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>"
    "(cudnn::ops::nhwc2nchw_params_t<float>, float const*, float*)"
)
BN_FW = "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)"
BN_BW = (
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, "
    "float const*, float*, float*, float const*, float const*, float)"
)
GEMM = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>"
    "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)"
)
NCCL_ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
MUL = "AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >"
THRESHOLD = "BinaryFunctor<float, float, float, at::native::threshold_kernel_impl<float> >"


def _ew(functor: str, n: int, dur: tuple[float, float], grid: int = 12544) -> Kernel:
    return Kernel(ELEMENTWISE.format(f=functor, n=n), dur, (grid, 1, 1), (128, 1, 1), 22)


# (name, duration range µs, grid, block, registers, shared memory): from the A100 trace
K_TO_NHWC = Kernel(NCHW2NHWC, (10, 40), (7, 32, 32), (256, 1, 1), 32, 4224)
K_TO_NCHW = Kernel(NHWC2NCHW, (8, 30), (7, 8, 32), (256, 1, 1), 32, 4224)
K_FPROP = Kernel(CONV_FPROP, (40, 160), (1, 196, 1), (128, 1, 1), 252, 67584)
K_WGRAD = Kernel(CONV_WGRAD, (50, 150), (4, 8, 3), (128, 1, 1), 234, 65536)
K_DGRAD = Kernel(GEMM, (40, 120), (16, 1, 32), (128, 1, 1), 222, 81920)
K_BN_FW = Kernel(BN_FW, (15, 60), (256, 1, 1), (512, 1, 1), 40, 26768)
K_BN_BW = Kernel(BN_BW, (30, 120), (512, 1, 1), (512, 1, 1), 40, 400)
K_RELU = _ew(MUL, 2, (10, 50))
K_RELU_BW = _ew(THRESHOLD, 3, (20, 80))
K_ADD = _ew("CUDAFunctor_add<float>", 3, (2, 30), 64)
NONE, ZERO = ([], "", ""), ([], "Scalar", "0")


def conv_block(c: int, hw: int, batch: int) -> tuple[list[Op], list[Op], list[int]]:
    """conv2d + batch_norm + relu_: (forward ops, backward ops, element counts of its parameters)."""
    x, w, ch = _t([batch, c, hw, hw]), _t([c, c, 3, 3]), _t([c])
    act = _nbytes(x[0])
    conv = Op(
        "aten::conv2d",
        [x, w, NONE, ([], "ScalarList", "[1, 1]")],
        [
            Op(
                "aten::convolution",
                [x, w],
                grad=True,
                children=[
                    Op(
                        "aten::_convolution",
                        [x, w],
                        children=[
                            Op(
                                "aten::cudnn_convolution",
                                [x, w],
                                alloc=act,
                                calls=["cudaStreamIsCapturing"],
                                children=[Op("aten::empty", [([4], "int", "")], self_us=(1, 3))],
                                kernels=[K_TO_NHWC, K_FPROP, K_TO_NCHW],
                            )
                        ],
                    )
                ],
            )
        ],
    )
    bn = Op(
        "aten::batch_norm",
        [x, ch, ch],
        [
            Op(
                "aten::_batch_norm_impl_index",
                [x, ch],
                children=[
                    Op(
                        "aten::cudnn_batch_norm",
                        [x, ch],
                        grad=True,
                        alloc=act,
                        kernels=[K_BN_FW],
                        children=[
                            Op("aten::empty_like", [x], self_us=(1, 4)),
                            Op("aten::empty", [([0], "", "")], self_us=(1, 3)),
                        ],
                    )
                ],
            )
        ],
    )
    relu = Op("aten::relu_", [x], grad=True, children=[Op("aten::clamp_min_", [x, ZERO], kernels=[K_RELU])])
    bwd = [
        _bwd_node(
            "ThresholdBackward0", x, [Op("aten::threshold_backward", [x, x, ZERO], alloc=act, kernels=[K_RELU_BW])]
        ),
        _bwd_node(
            "CudnnBatchNormBackward0",
            x,
            [
                Op(
                    "aten::cudnn_batch_norm_backward",
                    [x, x, ch],
                    alloc=act,
                    kernels=[K_BN_BW],
                    children=[Op("aten::empty_like", [x], self_us=(1, 4))],
                )
            ],
        ),
        _bwd_node(
            "ConvolutionBackward0",
            x,
            [
                Op(
                    "aten::convolution_backward",
                    [x, x, w],
                    alloc=act,
                    calls=["cudaStreamIsCapturing", "cudaFuncSetAttribute"],
                    kernels=[K_TO_NHWC, K_WGRAD, K_DGRAD],
                )
            ],
        ),
    ]
    return [conv, bn, relu], bwd, [c * c * 9, c, c]


def _bwd_node(name: str, x: tuple, children: list[Op]) -> Op:
    inner = Op(name, [x], children, bwd_node=True)
    return Op(f"autograd::engine::evaluate_function: {name}", [x], [inner])


def build_model(rng: random.Random, blocks: int) -> list[tuple[list[Op], list[Op], list[int]]]:
    """The network: `blocks` conv blocks with channel widths drawn once from the seeded rng."""
    layers, hw, batch = [], 56, 32
    for i in range(blocks):
        c = rng.choice((64, 128, 256, 512))
        layers.append(conv_block(c, max(7, hw >> (i * 3 // max(blocks, 1))), batch))
    return layers


# -- the event model ------------------------------------------------------------------------------
@dataclass
class Ev:
    """One trace event before formatting; `dur` of a span is filled in when the span closes."""

    group: int
    ts: int
    seq: int
    ph: str
    cat: str
    name: str
    pid: int
    tid: int
    dur: int = 0
    args: str = ""
    fid: int = 0


def fmt_time(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def format_event(e: Ev, ev_idx: int | None) -> str:
    """Render an event the way Kineto's C++ writer does (one key group per line)."""
    if e.ph == "X":
        idx = f', "Ev Idx": {ev_idx}' if ev_idx is not None else ""
        return (
            f'  {{\n    "ph": "X", "cat": "{e.cat}", "name": {_j(e.name)}, "pid": {e.pid}, "tid": {e.tid},\n'
            f'    "ts": {fmt_time(e.ts)}, "dur": {fmt_time(e.dur)},\n'
            f'    "args": {{\n      {e.args}{idx}\n    }}\n  }}'
        )
    if e.ph in "sf":
        bp = ', "bp": "e"' if e.ph == "f" else ""
        return (
            f'  {{\n    "ph": "{e.ph}", "id": {e.fid}, "pid": {e.pid}, "tid": {e.tid}, "ts": {fmt_time(e.ts)},\n'
            f'    "cat": "{e.cat}", "name": "{e.cat}"{bp}\n  }}'
        )
    return (
        f'  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
        f'    "pid": {e.pid}, "tid": {e.tid},\n    "ts": {fmt_time(e.ts)},\n'
        f'    "args": {{\n      {e.args}, "Ev Idx": {ev_idx}\n    }}\n  }}'
    )


class TraceState:
    """Clocks, id counters and allocator state of one rank, carried across steps."""

    def __init__(self, rng: random.Random, rank: int, world_size: int) -> None:
        self.rng, self.rank, self.world_size = rng, rank, world_size
        self.pid = 2910249 + 17 * rank
        self.main_tid, self.bwd_tid = self.pid, self.pid + 9503
        self.device = rank % 8
        self.now = {self.main_tid: START_NS, self.bwd_tid: START_NS}
        self.stream_free = {COMPUTE_STREAM: START_NS, NCCL_STREAM: START_NS}
        self.ext_id = self.rf_id = self.corr = self.flow_id = self.seq_nr = self.ev_idx = 0
        self.order = 0
        self.events: list[Ev] = []
        self.ext_stack: dict[int, list[int]] = {self.main_tid: [0], self.bwd_tid: [0]}
        self.gpu_ranges: list[list] = []  # open annotations projected onto the GPU: [min, max]
        self.addr, self.allocated, self.reserved = 139_870_000_000_000, 0, 0

    def us(self, lo: float, hi: float) -> int:
        return self.rng.randint(int(lo * 1000), int(hi * 1000))

    def add(self, group: int, ts: int, ph: str, cat: str, name: str, pid: int, tid: int, **kw) -> Ev:
        self.order += 1
        ev = Ev(group, ts, self.order, ph, cat, name, pid, tid, **kw)
        self.events.append(ev)
        return ev

    def group_of(self, tid: int) -> int:
        return 0 if tid == self.main_tid else 1


class StepWriter(TraceState):
    """Emits the events of one training step (see `step`)."""

    @contextmanager
    def span(
        self, tid: int, name: str, cat: str = "cpu_op", args: str = "", gpu_stream: int | None = None
    ) -> Iterator[Ev]:
        """A host range on `tid`; children emitted inside it nest by time, as in Kineto."""
        self.ext_id += 1
        self.rf_id += 1
        ext = self.ext_id
        head = f'"External id": {ext},"Record function id": {self.rf_id}'
        ev = self.add(self.group_of(tid), self.now[tid], "X", cat, name, self.pid, tid, args=head + args)
        self.now[tid] += self.us(1, 4)
        self.ext_stack[tid].append(ext)
        rng_box = [None, None]  # GPU time covered by the launches inside this range
        if gpu_stream is not None:
            self.gpu_ranges.append(rng_box)
        try:
            yield ev
        finally:
            self.ext_stack[tid].pop()
            if gpu_stream is not None:
                self.gpu_ranges.remove(rng_box)
                if rng_box[0] is not None:
                    self.add(
                        GPU_GROUP,
                        rng_box[0],
                        "X",
                        "gpu_user_annotation",
                        name,
                        self.device,
                        gpu_stream,
                        dur=rng_box[1] - rng_box[0],
                        args=f'"External id": {ext}',
                    )
            self.now[tid] += self.us(1, 3)
            ev.dur = self.now[tid] - ev.ts
            self.now[tid] += self.us(0.2, 1.5)  # siblings do not touch

    def runtime(self, tid: int, name: str, lo: float = 1.0, hi: float = 6.0, dur: int | None = None) -> Ev:
        """A cuda_runtime call on `tid` inside the innermost open op."""
        self.corr += 1
        ts = self.now[tid]
        dur = self.us(lo, hi) if dur is None else dur
        args = f'"External id": {self.ext_stack[tid][-1]},      "cbid": {CBID.get(name, 0)}, "correlation": {self.corr}'
        ev = self.add(self.group_of(tid), ts, "X", "cuda_runtime", name, self.pid, tid, dur=dur, args=args)
        self.now[tid] = ts + ev.dur + self.us(0.5, 2)
        return ev

    def launch(self, tid: int, k: Kernel, stream: int = COMPUTE_STREAM, extra: str = "") -> Ev:
        """Runtime launch + ac2g flow pair + the GPU activity, serialised on `stream`."""
        api = {"kernel": "cudaLaunchKernel", "gpu_memcpy": "cudaMemcpyAsync", "gpu_memset": "cudaMemsetAsync"}[k.cat]
        rt = self.runtime(tid, "cudaLaunchKernelExC" if stream == NCCL_STREAM else api, 3, 12)
        start = max(self.stream_free[stream], rt.ts + self.us(4, 20))
        dur = self.us(*k.dur_us)
        self.stream_free[stream] = start + dur + self.us(1, 4)
        ids = f'"External id": {self.ext_stack[tid][-1]},      '
        where = f'"device": {self.device}, "context": 1,      "stream": {stream}, "correlation": {self.corr},      '
        if k.cat == "kernel":
            blocks = k.grid[0] * k.grid[1] * k.grid[2]
            args = (
                f'{ids}"queued": 0, {where}"registers per thread": {k.regs},      "shared memory": {k.smem},      '
                f'"blocks per SM": {blocks / 108:.6f},      '
                f'"warps per SM": {blocks * k.block[0] / 32 / 108:.6f},      '
                f'"grid": {_j(list(k.grid))},      "block": {_j(list(k.block))},      '
                f'"est. achieved occupancy %": {self.rng.randint(0, 100)}{extra}'
            )
        else:
            args = f'{ids}{where}"bytes": {k.nbytes}, "memory bandwidth (GB/s)": {k.nbytes / max(dur, 1):.6f}'
        self.add(self.group_of(tid), rt.ts, "s", "ac2g", "", self.pid, tid, fid=self.corr)
        self.add(GPU_GROUP, start, "f", "ac2g", "", self.device, stream, fid=self.corr)
        for box in self.gpu_ranges:
            box[0] = start if box[0] is None else min(box[0], start)
            box[1] = start + dur if box[1] is None else max(box[1], start + dur)
        return self.add(GPU_GROUP, start, "X", k.cat, k.name, self.device, stream, dur=dur, args=args)

    def memory(self, tid: int, nbytes: int, addr: int) -> None:
        """A `[memory]` allocator event (nbytes < 0 for a free) on the GPU's caching allocator."""
        self.allocated += nbytes
        self.reserved = max(self.reserved, -(-self.allocated // (2 << 20)) * (2 << 20))
        args = (
            f'"Total Reserved": {self.reserved}, "Total Allocated": {self.allocated}, "Bytes": {nbytes}, '
            f'"Device Id": {self.device}, "Device Type": 1, "Addr": {addr}, "finished": false'
        )
        self.add(MEMORY_GROUP, self.now[tid], "i", "cpu_instant_event", "[memory]", self.pid, tid, args=args)

    def alloc(self, tid: int, nbytes: int) -> tuple[int, int]:
        self.addr += -(-nbytes // 512) * 512
        self.memory(tid, nbytes, self.addr)
        return self.addr, nbytes

    def free_layer(self, tid: int, allocs: list[tuple[int, int]]) -> None:
        for addr, nbytes in allocs:
            self.memory(tid, -nbytes, addr)
        allocs.clear()

    def emit_op(self, tid: int, op: Op, link: dict) -> None:
        """One op tree; `link` carries a layer's autograd links (sequence number, fwdbwd flow id) and activations."""
        seq = ""
        if op.grad:
            self.seq_nr += 1
            self.flow_id += 1
            link["grads"].append((self.seq_nr, self.flow_id))
        if op.grad or op.bwd_node:
            nr, flow = link["grads"][-1] if op.grad else link["grads"].pop()
            seq = f', "Sequence number": {nr}, "Fwd thread id": {0 if op.grad else 1}'
        with self.span(tid, op.name, op.cat, seq + op.shape_text) as ev:
            if op.grad or op.bwd_node:
                self.add(ev.group, ev.ts, "s" if op.grad else "f", "fwdbwd", "", self.pid, tid, fid=flow)
            if op.bwd_node:
                self.free_layer(tid, link["allocs"])
            temp = []
            if op.alloc:  # forward activations live until backward; backward buffers die with the op
                (link["allocs"] if op.grad or tid == self.main_tid else temp).append(self.alloc(tid, op.alloc))
            for child in op.children:
                self.emit_op(tid, child, link)
            for call in op.calls:
                self.runtime(tid, call)
            for k in op.kernels:
                self.launch(tid, k)
            self.now[tid] += self.us(*op.self_us)
            self.free_layer(tid, temp)

    # -- the phases of a training step ------------------------------------------------------------
    def step(self, n: int, model: list) -> None:
        """One `ProfilerStep#n`: copy the batch in, zero grads, forward, backward + all-reduce, SGD."""
        tid = self.main_tid
        with self.span(tid, f"ProfilerStep#{n}", "user_annotation"):
            batch = self.to_device(tid, [32, 3, 224, 224])
            with self.span(tid, "Optimizer.zero_grad#SGD.zero_grad", "user_annotation"):
                for _, _, params in model:
                    self.simple_op(
                        tid,
                        "aten::zero_",
                        [[params[0]]],
                        Kernel("Memset (Device)", (2, 8), cat="gpu_memset", nbytes=4 * params[0]),
                    )
            links = [{"grads": [], "allocs": []} for _ in model]
            with self.span(tid, "## forward ##", "user_annotation", gpu_stream=COMPUTE_STREAM):
                with self.span(tid, "DistributedDataParallel.forward", "user_annotation"):
                    for (fwd, _, _), link in zip(model, links):
                        for op in fwd:
                            self.emit_op(tid, op, link)
            with self.span(tid, "## backward ##", "user_annotation", gpu_stream=COMPUTE_STREAM):
                self.backward(model, links)
            with self.span(tid, "## optimizer ##", "user_annotation", gpu_stream=COMPUTE_STREAM):
                with self.span(tid, "Optimizer.step#SGD.step", "user_annotation"):
                    for _, _, params in model:
                        for nel in params:
                            self.simple_op(tid, "aten::add_", [[nel], [nel]], K_ADD)
            self.synchronize(tid)
            self.free_layer(tid, [batch])
        self.now[tid] += self.us(50, 400)  # the Python loop between steps

    def simple_op(self, tid: int, name: str, dims: list, k: Kernel) -> None:
        """A leaf cpu_op that launches one GPU activity."""
        shapes = f', "Input type": {_j(["float"] * len(dims))}, "Input Dims": {_j(dims)}'
        with self.span(tid, name, "cpu_op", shapes):
            self.launch(tid, k)

    def to_device(self, tid: int, dims: list) -> tuple[int, int]:
        """`batch.to("cuda")`: allocation + host-to-device copy; returns the allocation."""
        nbytes = _nbytes(dims)
        shapes = f', "Input type": ["float", "", ""], "Input Dims": {_j([dims, [], []])}'
        with self.span(tid, "aten::to", "cpu_op", shapes):
            with self.span(tid, "aten::_to_copy", "cpu_op"):
                with self.span(tid, "aten::empty_strided", "cpu_op"):
                    batch = self.alloc(tid, nbytes)
                self.simple_op(
                    tid,
                    "aten::copy_",
                    [dims, dims],
                    Kernel(
                        "Memcpy HtoD (Pinned -> Device)",
                        (nbytes / 22e3, nbytes / 18e3),
                        cat="gpu_memcpy",
                        nbytes=nbytes,
                    ),
                )
        return batch

    def backward(self, model: list, links: list[dict]) -> None:
        """The autograd thread: backward nodes in reverse order, gradient hooks, DDP buckets."""
        tid, bucket, params_done = self.bwd_tid, 0, []
        self.now[tid] = self.now[self.main_tid]
        for (_, bwd, params), link in zip(reversed(model), reversed(links)):
            for op in bwd:
                self.emit_op(tid, op, link)
            for nel in params:
                self.accumulate_grad(tid, nel)
                bucket += nel
            params_done += params
            if bucket >= 6_000_000 or link is links[0]:
                self.allreduce(tid, bucket)
                bucket = 0
        self.copy_buckets(tid, params_done)
        self.now[self.main_tid] = self.now[tid] + self.us(5, 20)

    def accumulate_grad(self, tid: int, nel: int) -> None:
        name = "torch::autograd::AccumulateGrad"
        with self.span(tid, f"autograd::engine::evaluate_function: {name}"):
            with self.span(tid, name, "cpu_op", f', "Input type": ["float"], "Input Dims": [[{nel}]]'):
                with self.span(tid, "aten::detach"):
                    with self.span(tid, "detach"):
                        pass
            with self.span(tid, "torch::distributed::reducer::mul_out"):
                self.simple_op(tid, "aten::mul", [[nel], []], _ew(MUL, 2, (2, 6), 1))

    def allreduce(self, tid: int, nelems: int) -> None:
        """A DDP bucket all-reduce: record_param_comms + NCCL kernel on its own stream (overlaps compute)."""
        ranks = _j(list(range(self.world_size)))
        size = (
            f'"In msg nelems": {nelems}, "Out msg nelems": {nelems}, "Group size": {self.world_size}, "dtype": "Float"'
        )
        pg = (
            f'"In split size": "[]", "Out split size": "[]", "Process Group Name": "0", '
            f'"Process Group Description": "default_pg", "Process Group Ranks": "{ranks}"'
        )
        comm = f'"Collective name": "allreduce", {size}, {pg}'
        rpc_args = f', {size}, "Global rank start": 0, "Global rank stride": 1, {pg}, "Collective name": "allreduce"'
        with self.span(tid, "record_param_comms", "cpu_op", rpc_args):
            with self.span(tid, "nccl:all_reduce", "user_annotation", gpu_stream=NCCL_STREAM):
                self.runtime(tid, "cudaEventRecord")
                self.runtime(tid, "cudaStreamWaitEvent")
                self.stream_free[NCCL_STREAM] = max(self.stream_free[NCCL_STREAM], self.stream_free[COMPUTE_STREAM])
                mb = nelems * 4 / 1e3  # µs at 1 GB/s
                k = Kernel(NCCL_ALLREDUCE, (mb / 12, mb / 8), (8, 1, 1), (544, 1, 1), 96, 87568)
                self.launch(tid, k, NCCL_STREAM, ", " + comm)
                self.runtime(tid, "cudaEventRecord")

    def copy_buckets(self, tid: int, params: list[int]) -> None:
        """DDP's finalize: the all-reduced buckets copied back into the gradients, after NCCL is done."""
        self.stream_free[COMPUTE_STREAM] = max(self.stream_free.values())
        for nel in params:
            with self.span(tid, "torch.distributed.ddp.reducer::copy_bucket_to_grad"):
                self.simple_op(
                    tid,
                    "aten::copy_",
                    [[nel], [nel]],
                    Kernel("Memcpy DtoD (Device -> Device)", (2, 2 + nel / 4e5), cat="gpu_memcpy", nbytes=4 * nel),
                )

    def synchronize(self, tid: int) -> None:
        """`loss.item()`: a device-to-host copy whose runtime call blocks until the GPU is idle."""
        with self.span(tid, "aten::item", "cpu_op", ', "Input type": ["float"], "Input Dims": [[]]'):
            with self.span(tid, "aten::_local_scalar_dense", "cpu_op"):
                self.launch(tid, Kernel("Memcpy DtoH (Device -> Pageable)", (2, 4), cat="gpu_memcpy", nbytes=4))
                idle = max(self.stream_free.values())
                self.runtime(tid, "cudaStreamSynchronize", dur=max(idle - self.now[tid], 1000))


# -- file layout ----------------------------------------------------------------------------------
DEVICE = (
    '    {{\n      "id": {i}, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85097971712,\n'
    '      "computeMajor": 8, "computeMinor": 0,\n      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
    '      "regsPerBlock": 65536, "warpSize": 32,\n      "sharedMemPerBlock": 49152, "numSms": 108\n'
    '    , "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912, "sharedMemPerMultiprocessor": 167936\n    }}'
)


def header(rank: int, world_size: int) -> str:
    """Everything before the first event, as Kineto writes it."""
    dist = {
        "backend": "nccl",
        "rank": rank,
        "world_size": world_size,
        "pg_count": 1,
        "pg_config": [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": world_size,
                "ranks": list(range(world_size)),
            }
        ],
        "nccl_version": "2.21.5",
    }
    devices = ",\n".join(DEVICE.format(i=i) for i in range(8))
    return (
        f'{{\n  "schemaVersion": 1,\n  "deviceProperties": [\n{devices}\n  ],\n  "record_shapes": 1,\n'
        f'  "profile_memory": 1,\n  "distributedInfo": {json.dumps(dist)},\n  "traceEvents": [\n'
    )


def metadata_events(st: TraceState) -> list[str]:
    """process/thread name rows, written after the events like Kineto does."""
    ts = fmt_time(START_NS - 30_000_000)
    rows = [
        ("process_name", st.pid, 0, '"name": "python3.10"'),
        ("process_labels", st.pid, 0, '"labels": "CPU"'),
        ("process_name", st.device, 0, '"name": "python3.10"'),
        ("process_labels", st.device, 0, f'"labels": "GPU {st.device}"'),
        ("thread_name", st.pid, st.main_tid, f'"name": "thread {st.main_tid} (pt_main_thread)"'),
        ("thread_name", st.pid, st.bwd_tid, f'"name": "thread {st.bwd_tid} (pt_autograd_0)"'),
        ("thread_name", st.device, COMPUTE_STREAM, f'"name": "stream {COMPUTE_STREAM} "'),
        ("thread_name", st.device, NCCL_STREAM, f'"name": "stream {NCCL_STREAM} "'),
    ]
    return [
        f'  {{\n    "name": "{n}", "ph": "M", "ts": {ts}, "pid": {p}, "tid": {t},\n'
        f'    "args": {{\n      {a}\n    }}\n  }}'
        for n, p, t, a in rows
    ]


def trailer(st: TraceState, trace_name: str) -> tuple[str, int]:
    """The profiler's own span and instants, then the keys after `traceEvents`."""
    start, end = START_NS - 30_000_000, max(max(st.now.values()), max(st.stream_free.values())) + 1000
    rows = metadata_events(st) + [
        f'  {{\n    "ph": "X", "cat": "Trace", "ts": {fmt_time(start)}, "dur": {fmt_time(end - start)},\n'
        f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        f'    "args": {{\n      "Op count": 0\n    }}\n  }}',
        f'  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
        f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {fmt_time(start)}\n  }}',
        f'  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
        f'    "pid": "", "tid": "", "ts": {fmt_time(end)}\n  }}',
    ]
    text = (
        ",\n" + ",\n".join(rows) + f'\n  ],\n  "traceName": {json.dumps(trace_name)},\n'
        f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {BASE_NS}\n}}\n'
    )
    return text, len(rows)


def render_step(st: TraceState) -> tuple[str, int]:
    """Format and drop the buffered events of one step: (text, event count)."""
    events = sorted(st.events, key=lambda e: (e.group, e.ts, e.seq))
    st.events = []
    parts = []
    for e in events:
        idx = None
        if e.group != GPU_GROUP and e.ph in "Xi" and e.cat != "cuda_runtime":
            idx, st.ev_idx = st.ev_idx, st.ev_idx + 1
        parts.append(format_event(e, idx))
    return ",\n".join(parts), len(parts)


def write_trace(
    path: Path,
    mb: float,
    rank: int = 0,
    world_size: int = 2,
    seed: int = 0,
    blocks: int = 16,
    use_gzip: bool = False,
    trace_name: str | None = None,
) -> dict:
    """Stream a trace of about `mb` MB (10^6 bytes, uncompressed) to `path`; return its statistics.

    The bytes depend only on the arguments (`traceName` is `trace_name`, default the file name).
    """
    rng = random.Random(seed * 1_000_003 + rank)
    st = StepWriter(rng, rank, world_size)
    model = build_model(rng, blocks)
    target = int(mb * 1e6)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = open(path, "wb")
    trace_name = trace_name or path.name
    gz = gzip.GzipFile(filename=trace_name, fileobj=raw, mode="wb", compresslevel=6, mtime=0) if use_gzip else None
    out = gz or raw
    written = events = steps = 0
    step_bytes = 0
    with raw, out:
        text = header(rank, world_size).encode()
        out.write(text)
        written += len(text)
        while steps == 0 or written + step_bytes // 2 < target:
            st.step(steps + 2, model)  # wait=1, warmup=1: the first recorded step is #2
            body, n = render_step(st)
            text = ((",\n" if steps else "") + body).encode()
            out.write(text)
            written, events, steps, step_bytes = written + len(text), events + n, steps + 1, len(text)
        tail, n = trailer(st, trace_name)
        text = tail.encode()
        out.write(text)
        written, events = written + len(text), events + n
    return {"path": str(path), "bytes": written, "events": events, "steps": steps, "file_bytes": path.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100, help="approximate uncompressed size in MB (10^6 bytes)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--gzip", action="store_true", help="gzip the output (the size target stays uncompressed)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=None, help="default: max(2, rank + 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blocks", type=int, default=16, help="conv blocks in the synthetic model (events per step)")
    a = ap.parse_args(argv)
    ws = a.world_size or max(2, a.rank + 1)
    if not 0 <= a.rank < ws:
        ap.error("--rank must be in [0, world_size)")
    stats = write_trace(a.output, a.mb, a.rank, ws, a.seed, a.blocks, a.gzip)
    print(
        f"wrote {stats['path']}: {stats['bytes'] / 1e6:.1f} MB uncompressed "
        f"({stats['file_bytes'] / 1e6:.1f} MB on disk), "
        f"{stats['events']:,} events, {stats['steps']} steps, {stats['bytes'] / stats['events']:.0f} B/event",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
