"""A small real training loop on the CPU: a 3-layer MLP classifying synthetic data with AdamW.

    python examples/train_small.py                                 # trains, prints the loss
    prof-engine collect -- python examples/train_small.py          # the same, recorded step by step

It knows nothing of the profiler but its markers: `mstx.range` names the phases of a step (free
when nothing records), so the recorded run shows them as user ranges around torch's ops. Each
`optimizer.step()` ends a step for `prof-engine collect`. Needs torch (`pip install torch==2.13.0`).
"""

from __future__ import annotations

import argparse

import torch

from prof_engine import mstx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="training steps")
    parser.add_argument("--batch", type=int, default=64, help="batch size")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
        torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 10),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, labels = torch.randn(512, 128), torch.randint(0, 10, (512,))

    for step in range(args.steps):
        with mstx.range("train_step"):
            with mstx.range("data"):
                i = (step * args.batch) % len(inputs)
                x, y = inputs[i:i + args.batch], labels[i:i + args.batch]
            with mstx.range("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with mstx.range("backward"):
                loss.backward()
            with mstx.range("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        if step % 5 == 4 or step == args.steps - 1:
            mstx.mark(f"loss {loss.item():.4f}")
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
