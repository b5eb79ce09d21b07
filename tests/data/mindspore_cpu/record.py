"""Record a small MindSpore CPU profile: a 2-layer Dense net trained a few steps on random data.

Run in a venv of its own (MindSpore needs numpy<2), not in prof-engine's environment:

    python3 -m venv /tmp/msvenv && /tmp/msvenv/bin/pip install 'numpy<2' mindspore==2.7.2
    /tmp/msvenv/bin/python tests/data/mindspore_cpu/record.py /tmp/ms_cpu_prof

It writes the profiler's output under the given directory (default ./ms_cpu_prof).
"""

import sys

import numpy as np

import mindspore as ms
from mindspore import nn

STEPS = 4


def main(out: str) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    np.random.seed(0)
    net = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 4))
    loss_fn = nn.MSELoss()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    x = ms.Tensor(np.random.randn(8, 16).astype(np.float32))
    y = ms.Tensor(np.random.randn(8, 4).astype(np.float32))
    profiler = ms.Profiler(output_path=out)
    for _ in range(STEPS):
        train(x, y)
    profiler.analyse()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ms_cpu_prof")
