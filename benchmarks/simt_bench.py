"""SIMT examples against PyTorch on one GPU: reduction, transpose, SGEMM (the bars), and more.

Run on a machine with an NVIDIA GPU and torch:

    python benchmarks/simt_bench.py            # prints the table, updates docs/performance.md
    python benchmarks/simt_bench.py --no-docs  # prints only

Every section runs in its own try/except, so one failure leaves the others'
numbers. Times are GPU times from CUDA events around `REPEATS` back-to-back
launches, queued behind a `torch.cuda._sleep` so Python's launch overhead
(oxide's and torch's alike) is not in them. Ratios are torch time / oxide time:
above 1.0 oxide is faster. Each oxide result is checked against torch first.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPEATS = 20
DOCS = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
START, END = "<!-- simt_bench:start -->", "<!-- simt_bench:end -->"


@dataclass
class Row:
    name: str
    problem: str
    reference: str
    oxide_s: float
    torch_s: float
    work: float  # bytes or flops per run
    unit: str  # "GB/s" or "TFLOP/s"
    bar: float | None = None  # the ratio the section must reach
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.torch_s / self.oxide_s

    def rate(self, seconds: float) -> str:
        scale = 1e12 if self.unit.startswith("T") else 1e9
        return f"{self.work / seconds / scale:,.1f}"

    @property
    def verdict(self) -> str:
        if self.bar is None:
            return ""
        return f"{'PASS' if self.ratio >= self.bar else 'FAIL'} (bar {self.bar:.0%})"


def gpu_seconds(fn: Callable[[], Any]) -> float:
    """Mean GPU time of one `fn()`, from events around REPEATS calls queued behind a sleep."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time: the CPU queues every launch meanwhile
    start.record()
    for _ in range(REPEATS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPEATS


def bench_reduction() -> Row:
    import torch

    from oxide.examples.reduction import BLOCK, reduce_sum

    n = 1 << 28
    x = torch.rand(n, device="cuda", dtype=torch.float32)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks = sms * (2048 // BLOCK)
    partials = torch.zeros(blocks, device="cuda")
    out = torch.zeros(1, device="cuda")
    reduce_sum(x, partials, out, blocks)
    want = x.sum(dtype=torch.float64).item()
    assert abs(out.item() - want) <= 1e-5 * want, (out.item(), want)
    t_ox = gpu_seconds(lambda: reduce_sum(x, partials, out, blocks))
    t_torch = gpu_seconds(lambda: torch.sum(x))
    return Row("reduction", "2^28 f32", "torch.sum", t_ox, t_torch, 4.0 * n, "GB/s", 0.90)


def bench_transpose() -> Row:
    import torch

    import oxide as ox
    from oxide.examples.transpose import launch_config, transpose

    n = 16384
    a = torch.randn(n, n, device="cuda")
    out = torch.empty_like(a)
    copy = torch.empty_like(a)
    config = launch_config(n, n)
    ox.launch(transpose, config, a, out)
    assert torch.equal(out, a.t()), "transpose differs from torch"
    t_ox = gpu_seconds(lambda: ox.launch(transpose, config, a, out))
    t_copy = gpu_seconds(lambda: copy.copy_(a))
    return Row("transpose", f"{n}^2 f32", "b.copy_(a)", t_ox, t_copy, 2.0 * 4 * n * n, "GB/s",
               0.80)


def bench_sgemm() -> Row:
    import torch

    import oxide as ox
    from oxide.examples.sgemm import launch_config, sgemm

    torch.backends.cuda.matmul.allow_tf32 = False
    n = 4096
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    config = launch_config(n, n)
    ox.launch(sgemm, config, a, b, c)
    want = a.double() @ b.double()
    err = ((c.double() - want).abs().max() / want.abs().max()).item()
    assert err < 1e-4, f"sgemm max relative error {err}"
    t_ox = gpu_seconds(lambda: ox.launch(sgemm, config, a, b, c))
    t_torch = gpu_seconds(lambda: torch.matmul(a, b, out=c))
    return Row("sgemm", f"{n}^3 f32", "torch.matmul (TF32 off)", t_ox, t_torch,
               2.0 * n ** 3, "TFLOP/s", 0.60)


def bench_histogram() -> Row:
    import torch

    import oxide as ox
    from oxide.examples.histogram import BINS, BLOCK, histogram

    n = 1 << 28
    data = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8)
    bins = ox.zeros(BINS, ox.u32, device=0)  # torch's uint32 support varies by version
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    config = ox.LaunchConfig(grid=sms * (2048 // BLOCK), block=BLOCK)
    ox.launch(histogram, config, data, bins)
    want = torch.bincount(data.int(), minlength=BINS).cpu().numpy()
    assert (bins.to_numpy() == want).all(), "histogram differs from torch.bincount"
    t_ox = gpu_seconds(lambda: ox.launch(histogram, config, data, bins))
    t_torch = gpu_seconds(lambda: torch.histc(data.float(), bins=BINS, min=0, max=255))
    return Row("histogram", "2^28 u8", "torch.histc (incl. u8->f32)", t_ox, t_torch, 1.0 * n,
               "GB/s")


def bench_scan() -> Row:
    import torch

    from oxide.examples.scan import BLOCK, exclusive_scan

    n = 1 << 20
    x = torch.randint(-9, 10, (n,), device="cuda", dtype=torch.int32)
    blocks = n // BLOCK
    partial, out = torch.empty_like(x), torch.empty_like(x)
    totals, offsets = (torch.empty(blocks, device="cuda", dtype=torch.int32) for _ in range(2))
    spare = torch.empty(1, device="cuda", dtype=torch.int32)
    args = (x, partial, totals, offsets, spare, out, n)
    exclusive_scan(*args)
    want = torch.cumsum(x, 0, dtype=torch.int32) - x
    assert torch.equal(out, want), "scan differs from torch.cumsum"
    t_ox = gpu_seconds(lambda: exclusive_scan(*args))
    t_torch = gpu_seconds(lambda: torch.cumsum(x, 0, dtype=torch.int32))
    return Row("scan", "2^20 i32", "torch.cumsum", t_ox, t_torch, 2.0 * 4 * n, "GB/s")


def bench_softmax() -> Row:
    import torch

    import oxide as ox
    from oxide.examples.softmax import BLOCK, softmax

    rows, cols = 8192, 8192
    x = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(x)
    config = ox.LaunchConfig(grid=rows, block=BLOCK)
    ox.launch(softmax, config, x, out)
    assert torch.allclose(out, torch.softmax(x, 1), rtol=1e-4, atol=1e-7), "softmax differs"
    t_ox = gpu_seconds(lambda: ox.launch(softmax, config, x, out))
    t_torch = gpu_seconds(lambda: torch.softmax(x, 1))
    return Row("softmax", f"{rows}x{cols} f32", "torch.softmax", t_ox, t_torch,
               2.0 * 4 * rows * cols, "GB/s")


SECTIONS = (bench_reduction, bench_transpose, bench_sgemm, bench_histogram, bench_scan,
            bench_softmax)


# ---------------------------------------------------------------------------
# Safe shared memory (issue 13): each kernel proved race-free vs its `unsafe` twin


@dataclass
class Pair:
    name: str
    problem: str
    safe_s: float
    unsafe_s: float
    same_ptx: bool

    @property
    def ratio(self) -> float:
        return self.unsafe_s / self.safe_s

    @property
    def verdict(self) -> str:
        return "PASS (within 2%)" if abs(self.ratio - 1) <= 0.02 else "FAIL (bar: within 2%)"


def ptx_instructions(ptx: str) -> list[str]:
    """The PTX's instructions, with the kernel's name and comments taken out."""
    lines = []
    for line in ptx.splitlines():
        line = re.sub(r"//.*", "", line).strip()
        if line and not line.startswith((".file", ".loc")):
            lines.append(re.sub(r"\b[A-Za-z]\w*?_[0-9a-f]{10}(?![0-9a-f])", "KERNEL", line))
    return lines


def timed_pair(safe: Callable[[], Any], unsafe: Callable[[], Any], rounds: int = 7
               ) -> tuple[float, float]:
    """Median times of the two, measured in alternation so drift hits both alike."""
    import statistics

    a, b = [], []
    for _ in range(rounds):
        a.append(gpu_seconds(safe))
        b.append(gpu_seconds(unsafe))
    return statistics.median(a), statistics.median(b)


def safety_pairs() -> list[Pair]:
    import sys

    import torch

    import oxide as ox

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import shared_kernels as sk

    from oxide.examples import histogram, sgemm, transpose

    pairs: list[Pair] = []

    def add(name: str, problem: str, safe_k: Any, unsafe_k: Any, cfg: Any,
            safe_args: tuple[Any, ...], unsafe_args: tuple[Any, ...],
            check: Callable[[], None]) -> None:
        ox.launch(safe_k, cfg, *safe_args)
        check()
        ox.launch(unsafe_k, cfg, *unsafe_args)
        check()
        major, minor = torch.cuda.get_device_capability(0)
        arch = f"sm_{major}{minor}"
        same = (ptx_instructions(safe_k.compile(*safe_args, arch=arch).ptx)
                == ptx_instructions(unsafe_k.compile(*unsafe_args, arch=arch).ptx))
        t_safe, t_unsafe = timed_pair(lambda: ox.launch(safe_k, cfg, *safe_args),
                                      lambda: ox.launch(unsafe_k, cfg, *unsafe_args))
        pairs.append(Pair(name, problem, t_safe, t_unsafe, same))
        print(f"{name} (safe vs unsafe): done", flush=True)

    n = 16384
    a = torch.randn(n, n, device="cuda")
    out = torch.empty_like(a)
    add("transpose", f"{n}^2 f32", transpose.transpose, sk.transpose_unsafe,
        transpose.launch_config(n, n), (a, out), (a, out),
        lambda: torch.testing.assert_close(out, a.t(), rtol=0, atol=0))
    torch.backends.cuda.matmul.allow_tf32 = False
    m = 4096
    a, b = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
    c = torch.empty(m, m, device="cuda")
    want = a @ b
    add("sgemm", f"{m}^3 f32", sgemm.sgemm, sk.sgemm_unsafe, sgemm.launch_config(m, m),
        (a, b, c), (a, b, c),
        lambda: torch.testing.assert_close(c, want, rtol=1e-3, atol=1e-3))
    k = 1 << 28
    x = torch.rand(k, device="cuda")
    blocks = k // sk.BLOCK
    partial = torch.empty(blocks, device="cuda")
    add("tree reduction", "2^28 f32, 1 sum per block", sk.tree_sum, sk.tree_sum_unsafe,
        ox.LaunchConfig(grid=blocks, block=sk.BLOCK), (x, partial), (x, partial),
        lambda: torch.testing.assert_close(partial.double().sum(), x.double().sum(),
                                           rtol=1e-5, atol=0))
    v = torch.randint(-100, 100, (1 << 26,), device="cuda", dtype=torch.int32)
    scanned = torch.empty_like(v)
    per = v.view(-1, sk.SCAN)
    add("Blelloch scan", "2^26 i32, 512 per block", sk.blelloch_scan, sk.blelloch_scan_unsafe,
        ox.LaunchConfig(grid=v.numel() // sk.SCAN, block=sk.BLOCK), (v, scanned), (v, scanned),
        lambda: torch.testing.assert_close(scanned.view(-1, sk.SCAN),
                                           (per.cumsum(1) - per).int()))
    data = torch.randint(0, 256, (1 << 28,), device="cuda", dtype=torch.uint8)
    bins = torch.zeros(histogram.BINS, device="cuda", dtype=torch.int32).view(torch.uint32)
    cfg = ox.LaunchConfig(grid=torch.cuda.get_device_properties(0).multi_processor_count * 8,
                          block=histogram.BLOCK)
    add("histogram", "2^28 u8", histogram.histogram, sk.histogram_unsafe, cfg, (data, bins),
        (data, bins), lambda: None)
    return pairs


def pairs_table(pairs: list[Pair]) -> str:
    lines = ["| kernel | problem | proved safe (no `unsafe`) | `unsafe` | unsafe / safe | "
             "same PTX | bar |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in pairs:
        lines.append(f"| {p.name} | {p.problem} | {p.safe_s * 1e3:.3f} ms | "
                     f"{p.unsafe_s * 1e3:.3f} ms | {p.ratio:.3f} | "
                     f"{'yes' if p.same_ptx else 'no'} | {p.verdict} |")
    return "\n".join(lines)


def table(rows: list[Row], failures: list[str]) -> str:
    lines = ["| kernel | problem | reference | oxide | reference | speed vs reference | bar |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.name} | {r.problem} | {r.reference} | {r.oxide_s * 1e3:.3f} ms "
                     f"({r.rate(r.oxide_s)} {r.unit}) | {r.torch_s * 1e3:.3f} ms "
                     f"({r.rate(r.torch_s)} {r.unit}) | {r.ratio:.2f} | {r.verdict} |")
    for f in failures:
        lines.append(f"| {f} | | | failed | | | |")
    return "\n".join(lines)


def environment() -> str:
    import llvmlite
    import torch

    import oxide as ox

    gpu = torch.cuda.get_device_name(0)
    return (f"{datetime.date.today().isoformat()}, {gpu}, oxide {ox.__version__}, "
            f"torch {torch.__version__} (CUDA {torch.version.cuda}), llvmlite "
            f"{llvmlite.__version__}, Python {platform.python_version()}")


def update_docs(section: str, start: str = START, end: str = END) -> None:
    """Replaces a benchmark's section of docs/performance.md, between its `start` and `end`
    markers (or appends it)."""
    text = DOCS.read_text() if DOCS.exists() else "# Performance\n"
    block = f"{start}\n{section}\n{end}"
    if start in text and end in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text,
                      flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/performance.md")
    parser.add_argument("--only", nargs="*", help="section names to run (default: all)")
    args = parser.parse_args()
    rows: list[Row] = []
    failures: list[str] = []
    for bench in SECTIONS:
        name = bench.__name__.removeprefix("bench_")
        if args.only and name not in args.only:
            continue
        try:
            rows.append(bench())
            print(f"{name}: done", flush=True)
        except Exception:  # noqa: BLE001 - a failing section must not hide the others
            traceback.print_exc()
            failures.append(name)
    pairs_text = ""
    if not args.only or "safety" in args.only:
        try:
            pairs_text = ("\n\n### Safe shared memory vs `unsafe` (issue 13)\n\n"
                          "The same kernels proved race-free at compile time and written "
                          "with `unsafe`: medians of 7 alternating measurements; the proof "
                          "is compile-time only, so the PTX should match.\n\n"
                          + pairs_table(safety_pairs()))
        except Exception:  # noqa: BLE001 - a failing section must not hide the others
            traceback.print_exc()
            failures.append("safety pairs")
    env = environment()
    body = table(rows, failures)
    section = ("## SIMT examples vs PyTorch (`benchmarks/simt_bench.py`)\n\n"
               f"{env}. GPU time per run (CUDA events, {REPEATS} runs queued back to back); "
               "ratio = reference time / oxide time.\n\n" + body + pairs_text)
    print()
    print(section)
    if not args.no_docs:
        update_docs(section)
        print(f"\nupdated {DOCS}")


if __name__ == "__main__":
    main()
