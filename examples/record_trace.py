"""Record a real PyTorch profiler trace (CPU) of a small training loop, as torch.profiler writes it.

    python examples/record_trace.py -o trace.json

The trace is what `prof-engine import` reads: Kineto JSON with ProfilerStep#N steps, ATen ops with
input shapes, memory events and user ranges. Needs torch (`pip install torch==2.13.0`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("trace.json"), help="trace file to write")
    parser.add_argument("--steps", type=int, default=6, help="training steps to run (all but the first 2 are recorded)")
    parser.add_argument("--hidden", type=int, default=512, help="hidden width of the model (change it, then compare runs)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, args.hidden), torch.nn.LayerNorm(args.hidden), torch.nn.GELU(), torch.nn.Linear(args.hidden, 10)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(4)]

    def save(prof: profile) -> None:
        prof.export_chrome_trace(str(args.output))

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=max(args.steps - 2, 1)),
                 record_shapes=True, profile_memory=True, on_trace_ready=save) as prof:
        for step in range(args.steps):
            x, y = data[step % len(data)]
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer_step"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
