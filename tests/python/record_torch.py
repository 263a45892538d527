#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Records a small model with real PyTorch's profiler on the CPU (tests/python/test_pytorch_peer.py).

    .venv-torch/bin/python tests/python/record_torch.py LOGDIR [--steps N]

Trains a little conv + MLP classifier (nn.Module submodules, cross-entropy, backward, SGD with
momentum) on a fixed synthetic data set read through a DataLoader, under

    torch.profiler.profile(activities=[CPU], record_shapes=True, profile_memory=True,
                           with_stack=True, with_flops=True, with_modules=True,
                           schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                           on_trace_ready=tensorboard_trace_handler(DIR[, use_gzip=True]))

twice: into LOGDIR/torch_cpu (plain .pt.trace.json) and LOGDIR/torch_cpu_gz (use_gzip=True).
Each step has a record_function range ("train_step", and "loss" inside it). Sizes and the seed
are fixed and one intra-op thread is used, so every run has the same operators, shapes and calls;
the times are real. A few seconds on one core.

Prints one JSON object on stdout: torch's version, the host name and pid the handler puts in the
file name, the time (ns) before and after each profile, and the files written.
"""

import argparse
import json
import os
import socket
import sys
import time
import warnings

# torch warns that numpy is missing (it is optional and not in requirements/torch.txt)
warnings.filterwarnings('ignore', message='Failed to initialize NumPy')

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402
from torch.profiler import tensorboard_trace_handler  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

BATCH = 8
SAMPLES = 64  # 8 batches per epoch: more than the steps, so the loader never runs out
CLASSES = 10
SCHEDULE = dict(wait=1, warmup=1, active=2, repeat=1)


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.act(self.bn(self.conv(x))))


class Head(nn.Module):
    def __init__(self, din, hidden, dout):
        super().__init__()
        self.fc1 = nn.Linear(din, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, dout)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(ConvBlock(3, 8), ConvBlock(8, 16))
        self.flatten = nn.Flatten()
        self.head = Head(16 * 4 * 4, 32, CLASSES)

    def forward(self, x):
        return self.head(self.flatten(self.features(x)))


def record(run_dir, steps, use_gzip):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(SAMPLES, 3, 16, 16), torch.randint(0, CLASSES, (SAMPLES,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=0)
    model = SmallNet()
    model.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    before = time.time_ns()
    with profile(activities=[ProfilerActivity.CPU],
                 record_shapes=True, profile_memory=True, with_stack=True, with_flops=True,
                 with_modules=True, schedule=schedule(**SCHEDULE),
                 on_trace_ready=tensorboard_trace_handler(run_dir, use_gzip=use_gzip)) as prof:
        batches = iter(loader)
        for _ in range(steps):
            images, labels = next(batches)  # the DataLoader's own record_function range
            with record_function('train_step'):
                optimizer.zero_grad(set_to_none=True)
                out = model(images)
                with record_function('loss'):
                    loss = criterion(out, labels)
                loss.backward()
                optimizer.step()
            prof.step()
    after = time.time_ns()
    files = sorted(f for f in os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    return {'dir': run_dir, 'gzip': use_gzip, 'before_ns': before, 'after_ns': after,
            'files': files}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('logdir', help='the folder that gets torch_cpu/ and torch_cpu_gz/')
    ap.add_argument('--steps', type=int, default=5,
                    help='training steps (the schedule needs 4: wait 1, warmup 1, active 2)')
    args = ap.parse_args()
    torch.set_num_threads(1)
    runs = [record(os.path.join(args.logdir, 'torch_cpu'), args.steps, False),
            record(os.path.join(args.logdir, 'torch_cpu_gz'), args.steps, True)]
    json.dump({'torch': torch.__version__, 'python': sys.version.split()[0],
               'host': socket.gethostname(), 'pid': os.getpid(), 'schedule': SCHEDULE,
               'steps': args.steps, 'runs': runs}, sys.stdout, indent=1)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
