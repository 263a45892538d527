#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Real PyTorch distributed (scripts/gpu-check.sh, part b): two processes, gloo, DDP on the one
GPU, each profiled with tensorboard_trace_handler(LOGDIR, worker_name="rankN", use_gzip=True),
so the run holds a distributed pair with distributedInfo and gloo collectives.

usage: torch_dist.py LOGDIR
"""
import glob
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from gpu_common import free_port


def worker(rank, world, logdir, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.cuda.set_device(0)
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    ddp = DDP(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(256, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(logdir, worker_name=f"rank{rank}", use_gzip=True),
                 record_shapes=True, profile_memory=True) as prof:
        for _ in range(5):
            opt.zero_grad(set_to_none=True)
            ddp(x).square().mean().backward()
            opt.step()
            prof.step()
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


def main():
    logdir = sys.argv[1]
    os.makedirs(logdir, exist_ok=True)
    mp.spawn(worker, args=(2, logdir, free_port()), nprocs=2, join=True)
    traces = sorted(glob.glob(os.path.join(logdir, "*.pt.trace.json.gz")))
    ok = len(traces) == 2
    print(f"{'PASS' if ok else 'FAIL'} torch ddp_gloo traces: {len(traces)} of 2 "
          f"({', '.join(os.path.basename(t) for t in traces)})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
