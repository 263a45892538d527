#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Modern PyTorch workloads on the GPU machine (scripts/gpu-check.sh, part d): the traces and
snapshots today's users make, recorded for the modern-defaults rules and the memory snapshot
reader. Each part runs alone (`--part NAME`) so that one failure or hang costs only itself:

  transformer   a small decoder (pre-norm, causal attention through
                scaled_dot_product_attention forced to the FlashAttention backend) under bf16
                autocast, its MLP's first projection as an FP8 GEMM (torch._scaled_mm, e4m3
                activations and weights), AdamW with fused=True; torch.profiler with every option
                and a schedule (wait=1, warmup=1, active=2), tensorboard_trace_handler (gzip)
  compiled      the same block under torch.compile (Inductor, Triton kernels), profiled after
                its compilation (CompiledFunction, triton_ kernels)
  nccl          NCCL collectives on every rank of a job (2 processes when NCCL accepts two ranks
                on the one GPU, else 1): all_reduce, all_gather_into_tensor,
                reduce_scatter_tensor, all_to_all_single, broadcast, coalesced all_reduces,
                send/recv when there are 2 ranks; each rank profiled as "rankN"
  snapshot      a caching-allocator history (_record_memory_history, stacks "all") over three
                training steps of the transformer, dumped with _dump_snapshot
  oom           the same history over a loop that runs out of memory under
                set_per_process_memory_fraction; the snapshot is dumped in the OOM handler, as
                users do (it holds the "oom" event)

Prints PASS/FAIL lines. usage: torch_modern.py OUTDIR --part NAME
"""
import argparse
import glob
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler


def line(ok, check, detail):
    print(f"{'PASS' if ok else 'FAIL'} modern {check}: {detail}", flush=True)


class _Fp8Matmul(torch.autograd.Function):
    """x W^T with the forward GEMM in FP8 (e4m3 operands, per-tensor scales, torch._scaled_mm,
    which has no derivative) and the backward GEMMs in bf16, the simplest FP8 training recipe."""

    @staticmethod
    def forward(ctx, x2, weight):
        ctx.save_for_backward(x2, weight)
        fp8 = torch.float8_e4m3fn
        amax = torch.finfo(fp8).max
        sx = x2.abs().amax().float().clamp(min=1e-12) / amax
        sw = weight.abs().amax().float().clamp(min=1e-12) / amax
        xq = (x2 / sx).to(fp8)
        wq = (weight / sw).to(fp8)
        # _scaled_mm wants the second operand column-major: W^T of a row-major W is.
        return torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, grad):
        x2, weight = ctx.saved_tensors
        grad = grad.to(torch.bfloat16)
        return grad @ weight.to(torch.bfloat16), (grad.t() @ x2.to(torch.bfloat16)).to(weight.dtype)


class Fp8Linear(nn.Module):
    """y = x W^T through _Fp8Matmul (Hopper and newer)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)

    def forward(self, x):
        shape = x.shape
        y = _Fp8Matmul.apply(x.reshape(-1, shape[-1]), self.weight)
        return y.reshape(*shape[:-1], -1)


class Block(nn.Module):
    def __init__(self, d, heads, fp8):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.up = Fp8Linear(d, 4 * d) if fp8 else nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab=8192, d=512, heads=8, layers=4, fp8=True):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, fp8) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def fp8_ok():
    return torch.cuda.get_device_capability(0) >= (8, 9) and hasattr(torch, "_scaled_mm")


def make_step(model, opt, batch=8, seq=1024, vocab=8192):
    tokens = torch.randint(0, vocab, (batch, seq + 1), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def profiled(logdir, worker, step, steps=5):
    os.makedirs(logdir, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(logdir, worker_name=worker, use_gzip=True),
                 record_shapes=True, profile_memory=True, with_stack=True, with_flops=True,
                 with_modules=True) as prof:
        for _ in range(steps):
            with record_function("train_step"):
                step()
            prof.step()
    torch.cuda.synchronize()
    return prof


def check_trace(logdir, label, must_have):
    """One trace in logdir whose kernel names contain every pattern of must_have."""
    import gzip
    import json
    traces = glob.glob(os.path.join(logdir, "*.pt.trace.json.gz"))
    if len(traces) != 1:
        line(False, label, f"{len(traces)} traces in {logdir}")
        return
    with gzip.open(traces[0], "rt") as f:
        events = json.load(f)["traceEvents"]
    kernels = {e.get("name", "") for e in events if e.get("cat") == "kernel"}
    missing = [p for p in must_have if not any(p in k for k in kernels)]
    line(not missing, label, f"{os.path.getsize(traces[0])} bytes gzip, {len(events)} events, "
         f"{len(kernels)} kernel names" + (f"; no kernel named like {missing}" if missing else ""))


def part_transformer(out):
    torch.manual_seed(0)
    fp8 = fp8_ok()
    model = Decoder(fp8=fp8).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step = make_step(model, opt)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(3):
            step()  # warm-up
        prof = profiled(os.path.join(out, "transformer_bf16_fp8"), "transformer", step)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=10), flush=True)
    check_trace(os.path.join(out, "transformer_bf16_fp8"), "transformer trace",
                ["flash_fwd", "flash_bwd"] + (["_qq"] if fp8 else []))  # cuBLASLt FP8: nvjet_sm90_qq...


def part_compiled(out):
    torch.manual_seed(0)
    model = Decoder(layers=2, fp8=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    cmodel = torch.compile(model)
    step = make_step(cmodel, opt, batch=4, seq=512)
    t0 = time.perf_counter()
    for _ in range(3):
        step()  # compilation, then warm
    torch.cuda.synchronize()
    print(f"INFO torch.compile: first steps in {time.perf_counter() - t0:.1f} s", flush=True)
    profiled(os.path.join(out, "compiled"), "compiled", step)
    check_trace(os.path.join(out, "compiled"), "compiled trace", ["triton_"])


def nccl_worker(rank, world, logdir, port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", 0))
    n = 1 << 20
    x = torch.full((n,), float(rank + 1), device="cuda")

    def step():
        dist.all_reduce(x)
        out = torch.empty(world * n, device="cuda")
        dist.all_gather_into_tensor(out, x)
        rs = torch.empty(n // world, device="cuda")
        dist.reduce_scatter_tensor(rs, x)
        a2a = torch.empty_like(x)
        dist.all_to_all_single(a2a, x)
        dist.broadcast(x, src=0)
        with dist._coalescing_manager(async_ops=True) as cm:
            for t in (x[: n // 2], x[n // 2:]):
                dist.all_reduce(t)
        cm.wait()
        if world == 2:
            peer = 1 - rank
            if rank == 0:
                dist.send(x, peer)
                dist.recv(x, peer)
            else:
                dist.recv(x, peer)
                dist.send(x, peer)
        y = x.view(1024, 1024) @ x.view(1024, 1024)
        x.copy_(y.view(-1) * 1e-6)
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    profiled(logdir, f"rank{rank}", step)
    dist.barrier()
    dist.destroy_process_group()


def part_nccl(out, world):
    import torch.multiprocessing as mp
    from gpu_common import free_port
    logdir = os.path.join(out, f"nccl_{world}rank")
    mp.spawn(nccl_worker, args=(world, logdir, free_port()), nprocs=world, join=True)
    traces = sorted(glob.glob(os.path.join(logdir, "*.pt.trace.json.gz")))
    line(len(traces) == world, f"nccl {world} rank(s) traces", ", ".join(os.path.basename(t) for t in traces))


def snapshot_steps(model, opt, steps):
    step = make_step(model, opt)
    for _ in range(steps):
        step()
    torch.cuda.synchronize()


def part_snapshot(out):
    torch.manual_seed(0)
    model = Decoder(fp8=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="all")
    snapshot_steps(model, opt, 3)
    path = os.path.join(out, "snapshot_train.pickle")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    line(os.path.getsize(path) > 0, "snapshot", f"{os.path.getsize(path)} bytes pickle")


def part_oom(out):
    torch.manual_seed(0)
    torch.cuda.set_per_process_memory_fraction(4 * 2**30 / torch.cuda.get_device_properties(0).total_memory)
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    path = os.path.join(out, "snapshot_oom.pickle")
    held = []
    try:
        model = Decoder(fp8=False).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        snapshot_steps(model, opt, 1)
        while True:  # a leak: activations kept across steps, as a forgotten list does
            held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as e:
        torch.cuda.memory._dump_snapshot(path)
        line(True, "oom", f"OutOfMemoryError after {len(held)} blocks of 256 MiB: {str(e).splitlines()[0][:120]}")
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
        held.clear()
    if not os.path.exists(path):
        line(False, "oom snapshot", "no OutOfMemoryError raised")
        return
    line(os.path.getsize(path) > 0, "oom snapshot", f"{os.path.getsize(path)} bytes pickle")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--part", required=True,
                    choices=["transformer", "compiled", "nccl2", "nccl1", "snapshot", "oom"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    if a.part == "transformer":
        part_transformer(a.out)
    elif a.part == "compiled":
        part_compiled(a.out)
    elif a.part.startswith("nccl"):
        part_nccl(a.out, int(a.part[-1]))
    elif a.part == "snapshot":
        part_snapshot(a.out)
    else:
        part_oom(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
