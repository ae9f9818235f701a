"""A tensor-parallel MLP block: oxide.tile kernels in every process, torch.distributed between.

    torchrun --nproc-per-node 2 -m oxide.examples.tp_mlp          # a GPU per process, NCCL
    torchrun --nproc-per-node 2 -m oxide.examples.tp_mlp --cpu    # the CPU, gloo
    python -m oxide.examples.tp_mlp --spawn 2 --cpu               # the same, without torchrun

The block is Megatron's MLP, `Y = GELU(X @ W1 + b1) @ W2 + b2`, split over N processes:
W1 by columns and W2 by rows, so each process computes its share of the hidden layer with
one oxide.tile kernel (the product, the bias and the GELU fused: `linear_gelu`), multiplies
it by its rows of W2 with another (`linear`), and `torch.distributed.all_reduce` sums the N
partial outputs (NCCL on GPUs, gloo on the CPU). oxide does no communication of its own.
Every process checks the result against the whole block computed in one place.

torch is the only thing this needs beyond oxide (`pip install torch`).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@tile.kernel(num_warps=4)
def linear_gelu(x: Slice[T, 2], w: Slice[T, 2], b: Slice[T], h: DisjointSlice[T, 2],
                BM: Const[int], BN: Const[int], BK: Const[int]):
    """h = GELU(x @ w + b), GELU by its tanh form (as torch's `approximate="tanh"`)."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
    z = acc + tile.load(b, (j,), (BN,)).astype(f32)[None, :]
    g = 0.5 * z * (1.0 + tile.tanh(SQRT_2_OVER_PI * (z + 0.044715 * z * z * z)))
    tile.store(h, (i, j), g.astype(T))


@tile.kernel(num_warps=4)
def linear(x: Slice[T, 2], w: Slice[T, 2], y: DisjointSlice[T, 2],
           BM: Const[int], BN: Const[int], BK: Const[int]):
    """y = x @ w."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
    tile.store(y, (i, j), acc.astype(T))


def tiles(gpu: bool) -> tuple[int, int, int]:
    return (128, 128, 32) if gpu else (32, 32, 16)


def mlp_shard(x: Any, w1: Any, b1: Any, w2: Any, gpu: bool) -> Any:
    """This process's partial output: GELU(x @ w1 + b1) @ w2 for its shards (torch tensors
    on the process's device)."""
    import torch

    bm, bn, bk = tiles(gpu)
    m, hidden, d = x.shape[0], w1.shape[1], w2.shape[1]
    h = torch.empty(m, hidden, dtype=x.dtype, device=x.device)
    y = torch.empty(m, d, dtype=x.dtype, device=x.device)
    ox.launch(linear_gelu, (-(-m // bm), -(-hidden // bn)), x, w1, b1, h, bm, bn, bk)
    ox.launch(linear, (-(-m // bm), -(-d // bn)), h, w2, y, bm, bn, bk)
    return y


def reference(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """The whole block in one place, in f64 (torch on the CPU)."""
    import torch

    x, w1, b1, w2, b2 = (t.double().cpu() for t in (x, w1, b1, w2, b2))
    h = torch.nn.functional.gelu(x @ w1 + b1, approximate="tanh")
    return h @ w2 + b2


def run(rank: int, world: int, cpu: bool, m: int, d: int, hidden: int, steps: int
        ) -> dict[str, float]:
    """One process of the job: builds the (seeded, identical) weights, keeps its shards,
    runs `steps` steps, checks the result. Returns the check and the step time."""
    import torch
    import torch.distributed as dist

    gpu = not cpu
    device = torch.device(f"cuda:{rank}") if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if gpu else torch.float32
    if hidden % world:
        raise SystemExit(f"the hidden size {hidden} must split evenly over {world} processes")
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(m, d, generator=g) / math.sqrt(d)
    w1 = torch.randn(d, hidden, generator=g) / math.sqrt(d)
    b1 = torch.randn(hidden, generator=g) * 0.1
    w2 = torch.randn(hidden, d, generator=g) / math.sqrt(hidden)
    b2 = torch.randn(d, generator=g) * 0.1
    part = hidden // world
    cols = slice(rank * part, (rank + 1) * part)
    mine = [t.to(device=device, dtype=dtype).contiguous()
            for t in (x, w1[:, cols], b1[cols], w2[cols, :])]
    bias2 = b2.to(device=device, dtype=dtype)
    with ox.device("cpu" if cpu else rank):
        y = None
        seconds = []
        for _ in range(steps):
            if gpu:
                torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
            y = mlp_shard(*mine, gpu=gpu)
            dist.all_reduce(y)
            y += bias2
            if gpu:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
    want = reference(x, w1, b1, w2, b2)
    err = float((y.double().cpu() - want).abs().max() / want.abs().max())
    tolerance = 2e-2 if gpu else 1e-4
    return {"rank": rank, "max_rel_error": err, "passed": err <= tolerance,
            "step_seconds": sorted(seconds)[len(seconds) // 2]}


def _worker(rank: int, world: int, cpu: bool, sizes: tuple[int, int, int], steps: int,
            port: int) -> None:
    """A process `--spawn` starts: the environment torchrun would give, then `main`."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    report = job(cpu, *sizes, steps)
    if not report["passed"]:
        raise SystemExit(f"rank {rank}: {report}")


def job(cpu: bool, m: int, d: int, hidden: int, steps: int) -> dict[str, float]:
    """One process of a torchrun (or spawned) job: joins the group, runs, leaves."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=world)
    try:
        report = run(rank, world, cpu, m, d, hidden, steps)
        print(f"rank {rank}/{world}: {'PASS' if report['passed'] else 'FAIL'} "
              f"(max relative error {report['max_rel_error']:.2e}), "
              f"{report['step_seconds'] * 1e3:.3f} ms per step", flush=True)
        return report
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="run on the CPU with gloo")
    parser.add_argument("--spawn", type=int, metavar="N",
                        help="start N processes here (instead of under torchrun)")
    parser.add_argument("--size", type=int, nargs=3, metavar=("M", "D", "H"),
                        help="tokens, model width, hidden width (default: 64 128 256 on the "
                             "CPU, 8192 4096 16384 on GPUs)")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = tuple(args.size) if args.size else ((64, 128, 256) if args.cpu
                                                else (8192, 4096, 16384))
    if args.spawn:
        import socket

        import torch.multiprocessing as mp

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_worker, args=(args.spawn, args.cpu, sizes, args.steps, port),
                 nprocs=args.spawn, join=True)
        return
    report = job(args.cpu, *sizes, args.steps)  # type: ignore[arg-type]
    if not report["passed"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
