"""Synthetic Kineto traces for the comparison tests: one GPU training loop, with noise and known changes.

Each step the host launches a fixed sequence of ops; each launches one kernel on stream 7. The
kernels run back to back (a few µs apart), then an NCCL all-reduce on stream 20, then the
optimizer kernel that ends the step. Every duration carries log-normal noise (σ 3 %) and now and
then a 30 % outlier, as real kernels do. Changes are injected by name:

- `slow={"aten::relu": 2.0}`: the kernels that op launches take twice as long;
- `drop={"aten::dropout"}`: the op, its launch and its kernel are gone;
- `step_time=1.10`: a stall before the optimizer kernel makes the step 10 % longer than the
  unchanged program's (whatever the other changes did to it).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from conftest import write_trace, x

BASE_US = 1_700_000_000_000_000.0
GAP_US = 2.0
# host op, kernel, input dims, kernel µs
OPS = (
    ("aten::linear", "sm80_xmma_gemm_f32f32_128x64", [[64, 512], [512, 512]], 300.0),
    ("aten::relu", "vectorized_elementwise_kernel<relu>", [[64, 512]], 60.0),
    ("aten::dropout", "fused_dropout_kernel_vec", [[64, 512], []], 60.0),
    ("aten::layer_norm", "vectorized_layer_norm_kernel", [[64, 512], [512], [512]], 80.0),
    ("aten::linear", "sm80_xmma_gemm_f32f32_128x64", [[64, 512], [512, 256]], 200.0),
    ("aten::add_", "vectorized_elementwise_kernel<add>", [[64, 256], [64, 256]], 30.0),
    ("aten::sum", "reduce_kernel<512>", [[64, 256]], 25.0),
)
ALLREDUCE = ("c10d::allreduce_", "ncclKernel_AllReduce_RING_LL_Sum_float", [[64, 256]], 100.0)
OPTIMIZER = ("aten::_foreach_add_", "multi_tensor_apply_kernel", [[512, 512]], 50.0)


def nominal_span(slow: dict[str, float], drop: set[str]) -> float:
    """The device span of a step without noise or stall: kernels, gaps, all-reduce, optimizer."""
    kernels = [us * slow.get(op, 1.0) for op, _, _, us in OPS if op not in drop]
    return sum(kernels) + GAP_US * len(kernels) + ALLREDUCE[3] + GAP_US + OPTIMIZER[3]


class _Step:
    """Builds one step's events; `rng` draws the noise."""

    def __init__(self, rng: random.Random, step: int, start: float, corr: int) -> None:
        self.rng, self.step, self.start, self.corr = rng, step, start, corr
        self.events: list[dict] = []
        self.device_end = start

    def noisy(self, us: float) -> float:
        outlier = 1.3 if self.rng.random() < 0.03 else 1.0
        return us * outlier * math.exp(self.rng.gauss(0.0, 0.03))

    def launch(self, i: int, op: str, kernel: str, dims: list, us: float, stream: int, after: float) -> float:
        """Host op `i` of the step launches `kernel`, which starts no earlier than `after`; returns its end."""
        self.corr += 1
        host = self.start + 5 + 12 * i
        self.events.append(x(op, host, self.noisy(9), **{"External id": self.corr, "Input Dims": dims}))
        self.events.append(
            x(
                "cudaLaunchKernel",
                host + 2,
                self.noisy(5),
                cat="cuda_runtime",
                correlation=self.corr,
                **{"External id": self.corr},
            )
        )
        begin = max(after + GAP_US * math.exp(self.rng.gauss(0.0, 0.3)), host + 7)
        dur = self.noisy(us)
        self.events.append(
            x(
                kernel,
                begin,
                dur,
                cat="kernel",
                pid=0,
                tid=stream,
                device=0,
                stream=stream,
                correlation=self.corr,
                **{"External id": self.corr},
            )
        )
        return begin + dur

    def memory(self, at: float, allocated: int) -> None:
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": at,
                "args": {
                    "Device Type": 1,
                    "Device Id": 0,
                    "Addr": 1 << 32,
                    "Bytes": 1 << 20,
                    "Total Allocated": allocated,
                    "Total Reserved": 2 * allocated,
                },
            }
        )


def make_trace(
    path: Path,
    seed: int,
    steps: int = 16,
    slow: dict[str, float] | None = None,
    drop: set[str] = frozenset(),
    step_time: float = 1.0,
) -> Path:
    """Write a synthetic trace of `steps` training steps to `path` (see the module docstring)."""
    slow = slow or {}
    rng = random.Random(seed)
    stall = step_time * nominal_span({}, set()) - nominal_span(slow, drop)
    events, start, corr = [], BASE_US, 0
    for step in range(1, steps + 1):
        s = _Step(rng, step, start, corr)
        end = start
        for i, (op, kernel, dims, us) in enumerate(OPS):
            if op not in drop:
                end = s.launch(i, op, kernel, dims, us * slow.get(op, 1.0), 7, end)
                s.memory(end, (100 + i) << 20)
        end = s.launch(len(OPS), *ALLREDUCE, 20, end)
        end = s.launch(len(OPS) + 1, *OPTIMIZER, 7, end + max(stall, 0.0))
        events += s.events
        events.append(x(f"ProfilerStep#{step}", start, end + 10 - start, cat="user_annotation"))
        start, corr = end + 15, s.corr
    return write_trace(path, events)


@pytest.fixture(scope="session")
def compare_runs(tmp_path_factory) -> dict[str, Path]:
    """Three imported runs: `base`; `changed` (relu kernels 2× slower, dropout removed, step +10 %);
    `noise` (the same program as base, other noise). Import a test module's fixture with
    `from compare_traces import compare_runs`."""
    import prof_engine

    d = tmp_path_factory.mktemp("compare")
    traces = {
        "base": make_trace(d / "base.json", seed=1),
        "changed": make_trace(
            d / "changed.json", seed=2, slow={"aten::relu": 2.0}, drop={"aten::dropout"}, step_time=1.10
        ),
        "noise": make_trace(d / "noise.json", seed=3),
    }
    return {name: prof_engine.import_trace([t], d / "runs" / name, jobs=1) for name, t in traces.items()}
