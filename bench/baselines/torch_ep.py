#!/usr/bin/env python3
"""PyTorch baseline of rudnn-bench-ep-comm (issue 25): expert-parallel dispatch and combine + AddRmsNorm
across ranks over NCCL, one process a GPU, launched under mpirun:

    mpirun -np 2 python3 bench/baselines/torch_ep.py [--bs 512] [--k 8] [--h 7168] [--experts 256]
                                                     [--dtype bf16|f16|f32] [--reps 20] [--warmup 5]
                                                     [--seed 1234] [--eps 1e-6] [--port 29517]

Rank, ranks and node-local rank come from mpi4py (MPI.COMM_WORLD) where it imports, else from Open
MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK. Each rank takes GPU local_rank % device count and
joins torch.distributed (backend nccl, tcp://127.0.0.1:PORT, rank 0 hosts the store).

The case is ep_comm_bench.c's: BS tokens a rank, each with K distinct experts drawn uniformly from E
routed experts, expert e on rank e // (E / ranks); the experts are the identity (the combine takes the
dispatch's expand_x back); no shared experts, no mask. Inputs per rank from a CUDA generator seeded
with seed + rank: x ~ 0.1 N(0, 1), scales uniform and summing to 1 a token, residual ~ 0.1 N(0, 1),
gamma in [0.5, 1.5).

Measurements ("op"):
  nccl_all_to_all_dispatch  all_to_all_single of [BS K, H] rows with equal splits: the bytes the
                            dispatch moves, at NCCL's best (no routing, no host round trip)
  torch_dispatch            the dispatch in PyTorch: destination rank of each (token, slot) row,
                            stable sort by destination, per-destination counts exchanged
                            (all_to_all_single), the split sizes read to the host (.tolist(): NCCL
                            wants lists), the rows and their local expert index exchanged, the
                            received rows stably sorted by local expert (expand_x, with the expert
                            offsets torch._grouped_mm takes). Its order is rudnn's: by local expert,
                            then source rank, then source token, then slot.
  nccl_all_to_all_combine   the same all-to-all again (the combine moves the same rows back)
  torch_combine             the combine + AddRmsNorm in PyTorch: the grouping by expert undone, the
                            rows sent back (all_to_all_single, the dispatch's splits swapped), on the
                            token's rank sum_k scale_k row_k in FP32 (index_add_), x = that +
                            residual, y = F.rms_norm(x, gamma, eps), x and y rounded to the dtype
  torch_layer               torch_dispatch then torch_combine in one timed region
  copy                      rank 0's device-to-device copy rate (torch_timing.copy_gbps)

Timing: --warmup untimed calls, then per repetition a torch.distributed.barrier() (outside the timed
region, as ep_comm_bench.c's MPI_Barrier) and CUDA events around the call; each repetition's time is
the slowest rank's (all_reduce MAX), and the line gives the median and minimum of those (median: the
mean of the middle two for an even count, as bench_util.c). Before the timing, one dispatch + combine
is checked: every row reached the rank of its expert, grouped by expert, and with identity experts
and scales summing to 1 the combine gives back x + residual and its RMSNorm.

Rank 0 prints one JSON line a measurement (diagnostics go to stderr), with ep_comm_bench.c's keys so
that bench/compare_ep.py can put them side by side: {"op", "bs", "k", "h", "experts", "ranks",
"dtype", "backend" ("torch"), "comm" ("nccl"), "device", "median_ms", "min_ms", "bytes" (rank 0's rows
that cross to another rank, H elements each; twice the dispatch's for torch_layer; (ranks - 1) /
ranks of all_bytes for the all-to-alls), "all_bytes" (all the rows the measurement moves from rank 0,
those that stay included), "gbps" (bytes / median), "reps", "torch" (torch.__version__)}, and last
{"op": "copy", "bytes", "backend", "device", "gbps"}.
"""
import argparse
import json
import os
import statistics
import sys
import traceback
from collections import namedtuple

import torch
import torch.distributed as dist
import torch.nn.functional as F

from torch_timing import copy_gbps, event_times

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# the check's tolerance: one rounding to the dtype (twice its unit roundoff, to spare); in f32 the few
# roundings of the FP32 sum, and ATOL for values near 0 (x + residual can cancel)
RTOL = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f32": 2.0 ** -20}
ATOL = 1e-5
COPY_BYTES = 1 << 30


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bs", type=int, default=512, help="tokens a rank")
    ap.add_argument("--k", type=int, default=8, help="experts a token (top-k)")
    ap.add_argument("--h", type=int, default=7168, help="hidden size")
    ap.add_argument("--experts", type=int, default=256, help="routed experts, divisible by the ranks")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234, help="rank r draws its inputs from seed + r")
    ap.add_argument("--eps", type=float, default=1e-6, help="RMSNorm epsilon")
    ap.add_argument("--port", type=int, default=29517, help="TCP port of rank 0's rendezvous on 127.0.0.1")
    return ap.parse_args()


# ---- processes ---------------------------------------------------------------------------------------

def world_info():
    """(rank, ranks, node-local rank, the mpi4py communicator or None)."""
    try:
        from mpi4py import MPI
    except ImportError:
        MPI = None
    if MPI is not None:
        comm = MPI.COMM_WORLD
        rank, world = comm.Get_rank(), comm.Get_size()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)  # the ranks on this host
        local = node.Get_rank()
        node.Free()
        return rank, world, local, comm
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(env.get("OMPI_COMM_WORLD_SIZE", "1"))
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", str(rank)))
    return rank, world, local, None


def abort(mpi_comm, code):
    """End every rank now: the others may be waiting in a collective for this one (until NCCL's
    timeout), and mpi4py's MPI_Finalize at exit would wait for them."""
    sys.stdout.flush()
    sys.stderr.flush()
    if mpi_comm is not None:
        mpi_comm.Abort(code)
    os._exit(code)


def problems(a, world):
    out = []
    if world < 1:
        out.append("ranks >= 1")
    if a.bs < 1 or a.h < 1 or a.reps < 1 or a.warmup < 0:
        out.append("bs, h, reps >= 1 and warmup >= 0")
    if not 1 <= a.k <= a.experts:
        out.append("k in 1..experts")
    if world >= 1 and a.experts % world:
        out.append("experts (%d) divisible by the ranks (%d)" % (a.experts, world))
    if world >= 1 and (a.bs * a.k) % world:
        out.append("bs * k (%d) divisible by the ranks (%d) for the equal-split all-to-all" % (a.bs * a.k, world))
    if not a.eps >= 0:
        out.append("eps >= 0")
    return out


# ---- the layer ---------------------------------------------------------------------------------------

# What the dispatch leaves for the combine, as a real layer keeps it: expand_x [A, H] grouped by local
# expert, offsets (int32 [L], end of each local expert's rows), order (the sent rows: flat (token, slot)
# indices sorted by destination), recv_order (the received rows sorted by local expert), and the split
# sizes (lists) of the rows sent to and received from each rank.
Dispatched = namedtuple("Dispatched", "expand_x offsets order recv_order send_splits recv_splits")


class EpLayer:
    """Dispatch and combine + AddRmsNorm written with stock PyTorch ops over torch.distributed."""

    def __init__(self, world, experts, device):
        self.world = world
        self.local = experts // world  # L: experts a rank; expert e on rank e // L
        self.ranks = torch.arange(world, device=device)
        self.local_ids = torch.arange(self.local, device=device, dtype=torch.int32)

    def dispatch(self, x, ids):
        w, L = self.world, self.local
        bs, k = ids.shape
        flat = ids.reshape(-1)  # row t * k + s: token t's slot s
        dest = flat // L
        order = torch.argsort(dest, stable=True)  # by destination, then token, then slot
        send_x = x.index_select(0, order // k)
        send_e = (flat - dest * L).index_select(0, order).to(torch.int32)  # local expert on the destination
        send_n = (dest.unsqueeze(1) == self.ranks).sum(0)  # rows to each rank (int64; no bincount: it syncs)
        recv_n = torch.empty_like(send_n)
        dist.all_to_all_single(recv_n, send_n)
        # the layer's one host round trip: NCCL's variable all-to-all takes the split sizes as lists
        counts = torch.cat((send_n, recv_n)).tolist()
        send_splits, recv_splits = counts[:w], counts[w:]
        assert sum(send_splits) == bs * k, "every (token, slot) row is sent once"
        rows = sum(recv_splits)
        recv_x = x.new_empty((rows, x.shape[1]))
        dist.all_to_all_single(recv_x, send_x, output_split_sizes=recv_splits, input_split_sizes=send_splits)
        recv_e = send_e.new_empty(rows)
        dist.all_to_all_single(recv_e, send_e, output_split_sizes=recv_splits, input_split_sizes=send_splits)
        # rows arrive by source rank (then token, slot); a stable sort by expert keeps that within an expert
        sorted_e, recv_order = torch.sort(recv_e, stable=True)
        expand_x = recv_x.index_select(0, recv_order)
        assert expand_x.shape[0] == rows == sum(recv_splits), "received rows = the sum of the output splits"
        offsets = torch.searchsorted(sorted_e, self.local_ids, right=True, out_int32=True)
        return Dispatched(expand_x, offsets, order, recv_order, send_splits, recv_splits)

    def combine(self, expert_out, d, scales, residual, gamma, eps):
        bs, h = residual.shape
        k = scales.shape[1]
        back = torch.empty_like(expert_out)
        back.index_copy_(0, d.recv_order, expert_out)  # back to the order the rows arrived in
        ret = expert_out.new_empty((sum(d.send_splits), h))
        # the reverse trip: receive what was sent, send what was received
        dist.all_to_all_single(ret, back, output_split_sizes=d.send_splits, input_split_sizes=d.recv_splits)
        assert ret.shape[0] == bs * k, "every (token, slot) row comes back"
        tok = d.order // k
        wts = scales.reshape(-1).index_select(0, d.order)
        acc = torch.zeros((bs, h), dtype=torch.float32, device=residual.device)
        acc.index_add_(0, tok, ret.float().mul_(wts.unsqueeze(1)))  # FP32 sum over the K slots
        xs = acc.add_(residual)  # FP32; RMS of the unrounded x, as rudnn
        y = F.rms_norm(xs, (h,), gamma.float(), eps)
        return xs.to(residual.dtype), y.to(residual.dtype)

    def layer(self, x, ids, scales, residual, gamma, eps):
        d = self.dispatch(x, ids)
        return self.combine(d.expand_x, d, scales, residual, gamma, eps)  # identity experts


# ---- checks and timing -------------------------------------------------------------------------------

def all_ok(ok, device):
    """Whether every rank is ok (so that all of them stop together)."""
    t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def close(got, ref, rtol):
    """Whether |got - ref| <= rtol |ref| + ATOL everywhere, and the largest |got - ref|."""
    diff = (got.float() - ref).abs()
    if not diff.numel():
        return True, 0.0
    return bool((diff <= rtol * ref.abs() + ATOL).all().item()), float(diff.max().item())


def check(layer, inp, a, rank, world, device):
    """One dispatch + combine, untimed: this rank's failures as strings, and its rows sent to other ranks."""
    x, ids, scales, residual, gamma = inp
    fails = []
    d = layer.dispatch(x, ids)
    rows = d.expand_x.shape[0]
    remote = sum(d.send_splits) - d.send_splits[rank]
    if d.offsets.numel() and int(d.offsets[-1].item()) != rows:
        fails.append("expert offsets end at %d, %d rows received" % (int(d.offsets[-1].item()), rows))
    total = torch.tensor([rows], dtype=torch.int64, device=device)
    dist.all_reduce(total)
    if int(total.item()) != world * a.bs * a.k:
        fails.append("%d rows received over all ranks, %d sent" % (int(total.item()), world * a.bs * a.k))
    # the global expert of each row, sent along the same path: all on this rank, grouped by expert
    send_g = ids.reshape(-1).index_select(0, d.order)
    recv_g = send_g.new_empty(rows)
    dist.all_to_all_single(recv_g, send_g, output_split_sizes=d.recv_splits, input_split_sizes=d.send_splits)
    recv_g = recv_g.index_select(0, d.recv_order)
    if rows and not bool((recv_g // layer.local == rank).all().item()):
        fails.append("rows received for another rank's experts")
    if rows > 1 and not bool((recv_g[1:] >= recv_g[:-1]).all().item()):
        fails.append("expand_x not grouped by expert")
    # identity experts and scales summing to 1: combined = x, so x_out = x + residual
    x_out, y_out = layer.combine(d.expand_x, d, scales, residual, gamma, a.eps)
    ref_x = x.float() + residual.float()
    ref_y = F.rms_norm(ref_x, (a.h,), gamma.float(), a.eps)
    for name, got, ref in (("x", x_out, ref_x), ("y", y_out, ref_y)):
        ok, worst = close(got, ref, RTOL[a.dtype])
        if not ok:
            fails.append("combine output %s off by up to %g" % (name, worst))
    return fails, remote


def rep_times(fn, reps, warmup, device):
    """fn's time per repetition in ms, the slowest rank's: (median, minimum)."""
    # the ranks start each repetition together, as ep_comm_bench.c (a barrier blocks until its
    # all-reduce is done)
    times = event_times(fn, reps, warmup, before=dist.barrier)
    t = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    t = t.tolist()
    return statistics.median(t), min(t)


def emit(rank, rec):
    if rank == 0:
        print(json.dumps(rec, separators=(",", ":")), flush=True)


# ---- main --------------------------------------------------------------------------------------------

def inputs(a, rank, device, dt):
    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed + rank)
    x = torch.randn(a.bs, a.h, generator=gen, device=device).mul_(0.1).to(dt)
    # K distinct experts a token, uniform: the top K of E uniform draws
    ids = torch.rand(a.bs, a.experts, generator=gen, device=device).topk(a.k, dim=1).indices
    scales = torch.rand(a.bs, a.k, generator=gen, device=device).clamp_min_(1e-6)
    scales /= scales.sum(dim=1, keepdim=True)
    residual = torch.randn(a.bs, a.h, generator=gen, device=device).mul_(0.1).to(dt)
    gamma = (0.5 + torch.rand(a.h, generator=gen, device=device)).to(dt)
    return x, ids, scales, residual, gamma


def run(a, rank, world, device):
    dt = DTYPES[a.dtype]
    es = torch.empty((), dtype=dt).element_size()
    name = torch.cuda.get_device_name()
    layer = EpLayer(world, a.experts, device)
    inp = inputs(a, rank, device, dt)
    x, ids, scales, residual, gamma = inp

    fails, remote = check(layer, inp, a, rank, world, device)
    for f in fails:
        print("torch_ep.py: rank %d: %s" % (rank, f), file=sys.stderr, flush=True)
    if not all_ok(not fails, device):
        if rank == 0:
            print("torch_ep.py: the check of the PyTorch dispatch + combine failed; nothing timed",
                  file=sys.stderr, flush=True)
        return 1
    if rank == 0:
        print("torch_ep.py: %d ranks, %s, check passed; rank 0 sends %d of its %d rows to other ranks"
              % (world, name, remote, a.bs * a.k), file=sys.stderr, flush=True)

    all_bytes = a.bs * a.k * a.h * es
    a2a_bytes = all_bytes * (world - 1) // world  # equal splits: one share of the rows stays
    ep_bytes = remote * a.h * es

    def line(op, med, mn, nbytes, nall):
        emit(rank, {"op": op, "bs": a.bs, "k": a.k, "h": a.h, "experts": a.experts, "ranks": world,
                    "dtype": a.dtype, "backend": "torch", "comm": "nccl", "device": name,
                    "median_ms": round(med, 6), "min_ms": round(mn, 6), "bytes": nbytes, "all_bytes": nall,
                    "gbps": round(nbytes / (med * 1e6), 2) if med > 0 else 0.0, "reps": a.reps,
                    "torch": torch.__version__})

    # NCCL's all-to-all of the dispatch's bytes: realistic rows (each token K times), equal splits
    a2a_in = x.repeat_interleave(a.k, dim=0)
    a2a_out = torch.empty_like(a2a_in)

    def a2a():
        dist.all_to_all_single(a2a_out, a2a_in)

    med, mn = rep_times(a2a, a.reps, a.warmup, device)
    line("nccl_all_to_all_dispatch", med, mn, a2a_bytes, all_bytes)

    med, mn = rep_times(lambda: layer.dispatch(x, ids), a.reps, a.warmup, device)
    line("torch_dispatch", med, mn, ep_bytes, all_bytes)

    med, mn = rep_times(a2a, a.reps, a.warmup, device)
    line("nccl_all_to_all_combine", med, mn, a2a_bytes, all_bytes)

    d = layer.dispatch(x, ids)  # the combine's input, kept as a layer keeps its dispatch's results
    med, mn = rep_times(lambda: layer.combine(d.expand_x, d, scales, residual, gamma, a.eps), a.reps, a.warmup,
                        device)
    line("torch_combine", med, mn, ep_bytes, all_bytes)
    del d

    med, mn = rep_times(lambda: layer.layer(x, ids, scales, residual, gamma, a.eps), a.reps, a.warmup, device)
    line("torch_layer", med, mn, 2 * ep_bytes, 2 * all_bytes)

    del a2a_in, a2a_out
    torch.cuda.empty_cache()
    if rank == 0:
        gbps = copy_gbps(a.reps, COPY_BYTES)
        emit(rank, {"op": "copy", "bytes": COPY_BYTES, "backend": "torch", "device": name, "gbps": round(gbps, 1)})
    dist.barrier()  # the other ranks wait for rank 0's copy before the process group goes
    return 0


def main():
    a = parse_args()
    rank, world, local, mpi_comm = world_info()
    bad = problems(a, world)
    if bad:
        if rank == 0:
            print("torch_ep.py: need " + "; ".join(bad), file=sys.stderr, flush=True)
        return 2
    if not torch.cuda.is_available():
        if rank == 0:
            print("torch_ep.py: no CUDA device", file=sys.stderr, flush=True)
        return 2
    dev_index = local % torch.cuda.device_count()
    torch.cuda.set_device(dev_index)
    device = torch.device("cuda", dev_index)
    try:
        dist.init_process_group(backend="nccl", init_method="tcp://127.0.0.1:%d" % a.port, rank=rank,
                                world_size=world, device_id=device)
        rc = run(a, rank, world, device)
        dist.destroy_process_group()
        return rc
    except BaseException:  # any failure on one rank must end all of them
        traceback.print_exc()
        abort(mpi_comm, 1)


if __name__ == "__main__":
    sys.exit(main())
