#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Real PyTorch on the GPU machine (scripts/gpu-check.sh, part b): a torchvision ResNet-18
trained with AMP from a DataLoader under torch.profiler with every option, as users run it:

    profile(activities=[CPU, CUDA], schedule=schedule(wait=1, warmup=1, active=2),
            on_trace_ready=tensorboard_trace_handler(LOGDIR, use_gzip=True), record_shapes,
            profile_memory, with_stack, with_flops, with_modules)

then a CUDA caching-allocator snapshot (_record_memory_history / _dump_snapshot), and
torch.profiler's own cost: per aten op on CPU tensors and per CUDA op, with and without the
profiler, and the training step with and without it. Prints PASS/FAIL lines.

usage: torch_train.py LOGDIR --snapshot FILE --summary FILE
"""
import argparse
import glob
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler


def line(ok, check, detail):
    print(f"{'PASS' if ok else 'FAIL'} torch {check}: {detail}", flush=True)


def per_op_ns(fn, n):
    fn(200)  # warm-up
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logdir")
    ap.add_argument("--snapshot", required=True)
    ap.add_argument("--summary", required=True)
    a = ap.parse_args()
    dev = "cuda"
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18(num_classes=100).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    data = torch.utils.data.TensorDataset(torch.randn(768, 3, 128, 128), torch.randint(0, 100, (768,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=2, pin_memory=True,
                                         persistent_workers=True, shuffle=True)

    def train_step(x, y):
        x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    def epoch_steps(n, prof=None):
        done = 0
        while done < n:
            for x, y in loader:
                train_step(x, y)
                if prof is not None:
                    prof.step()
                done += 1
                if done == n:
                    break
        torch.cuda.synchronize()

    epoch_steps(6)  # warm-up: cuDNN autotuning, workers
    t0 = time.perf_counter()
    epoch_steps(10)
    step_off_ms = (time.perf_counter() - t0) * 100

    os.makedirs(a.logdir, exist_ok=True)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(a.logdir, worker_name="resnet18", use_gzip=True),
                 record_shapes=True, profile_memory=True, with_stack=True, with_flops=True,
                 with_modules=True) as prof:
        epoch_steps(5, prof)
    profiled_s = time.perf_counter() - t0
    traces = glob.glob(os.path.join(a.logdir, "*.pt.trace.json.gz"))
    sizes = [os.path.getsize(t) for t in traces]
    line(len(traces) == 1 and all(s < 15 << 20 for s in sizes), "resnet18 trace",
         f"{len(traces)} trace(s), {sum(sizes)} bytes gzip; 5 profiled steps in {profiled_s:.2f} s")
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=8)
    print(table)

    # The caching allocator's own record, for the memory snapshot reader.
    torch.cuda.memory._record_memory_history(max_entries=100000)
    epoch_steps(2)
    torch.cuda.memory._dump_snapshot(a.snapshot)
    torch.cuda.memory._record_memory_history(enabled=None)
    line(os.path.getsize(a.snapshot) > 0, "memory snapshot", f"{os.path.getsize(a.snapshot)} bytes pickle")

    # torch.profiler's own cost: the anchor kinetoscope's figures are compared with.
    cpu_a, cpu_b = torch.ones(4), torch.ones(4)
    gpu_a, gpu_b = torch.ones(4, device=dev), torch.ones(4, device=dev)

    def cpu_ops(n):
        for _ in range(n):
            torch.add(cpu_a, cpu_b)

    def gpu_ops(n):
        for _ in range(n):
            torch.add(gpu_a, gpu_b)
        torch.cuda.synchronize()

    def ranges(n):
        for _ in range(n):
            with record_function("range"):
                pass

    n = 20000
    summary = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "n": n}
    summary["cpu_op_off_ns"] = per_op_ns(cpu_ops, n)
    summary["gpu_op_off_ns"] = per_op_ns(gpu_ops, n)
    summary["range_off_ns"] = per_op_ns(ranges, n)
    with profile(activities=[ProfilerActivity.CPU]):
        summary["cpu_op_on_ns"] = per_op_ns(cpu_ops, n)
        summary["range_on_ns"] = per_op_ns(ranges, n)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        summary["gpu_op_on_ns"] = per_op_ns(gpu_ops, n)
    summary["train_step_off_ms"] = step_off_ms
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True, with_stack=True, with_flops=True, with_modules=True):
        t1 = time.perf_counter()
        epoch_steps(4)
        summary["train_step_on_ms"] = (time.perf_counter() - t1) * 250
    summary["profile_stop_s"] = time.perf_counter() - t0 - summary["train_step_on_ms"] / 250
    with open(a.summary, "w") as f:
        json.dump(summary, f, indent=1)
    s = summary
    print("INFO torch profiler overhead: "
         f"torch {s['torch']} on {s['gpu']}: aten::add on CPU {s['cpu_op_off_ns']:.0f} -> {s['cpu_op_on_ns']:.0f} ns "
         f"(+{s['cpu_op_on_ns'] - s['cpu_op_off_ns']:.0f}), on CUDA {s['gpu_op_off_ns']:.0f} -> {s['gpu_op_on_ns']:.0f} ns "
         f"(+{s['gpu_op_on_ns'] - s['gpu_op_off_ns']:.0f}), record_function {s['range_off_ns']:.0f} -> "
         f"{s['range_on_ns']:.0f} ns; ResNet-18 step {s['train_step_off_ms']:.1f} -> {s['train_step_on_ms']:.1f} ms "
         f"with every option", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
