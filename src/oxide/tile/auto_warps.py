"""The warps and occupancy of a `num_warps="auto"` tile kernel, one specialization at a time.

What it assumes: a tile kernel without `tile.mma` (a product's warps trade tensor-core
shapes and warp specialization against registers, which this rule does not weigh), and
a signature of its parameters.
What it decides: the fewest warps of 4, 8, 16 and 32 at which the tiles live at once
(tile/register_budget.py `live_registers`, after the layout pass) take at most
`LIVE_TARGET` registers a thread, with the occupancy that fills half the SM's 2048
threads (`.minnctapersm`: 1024 / (32 * warps) blocks), which caps a thread at 64
registers. Where even 32 warps need more, 32 warps without an occupancy (ptxas may then
take up to 255 registers; the register budget warns past what fits).

Why this rule (H200, 2026-12-04, `benchmarks/wide_rows.py` and tile_wide_rows'
ROW_CONFIGS, each the fastest somewhere): layer norm's fastest whole-row configs hold
64 registers of live tiles a thread (8192 columns on 8 warps at occupancy 4, 32768 on
32 warps), softmax's 33-65 (8192 on 8 warps, 32768 on 16); the shipped kernels on a
fixed 8 warps fell to 0.15x-0.3x Triton where their live tiles took 256 registers. The
choice is the same for every target, so the CPU reduces in the same order as the GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oxide.errors import CompileError, UnsupportedFeatureError

MEMO_FORMAT = 1  # of the JSON files: another format is ignored (and the choice made again)

CANDIDATES = (4, 8, 16, 32)
LIVE_TARGET = 64  # registers a thread's live tiles may take
SM_THREADS = 2048  # threads an SM holds (sm_80 and later)


@dataclass(frozen=True)
class WarpChoice:
    """The block's warps, its occupancy (None: ptxas's choice), and the estimate of the
    registers the live tiles take a thread at those warps."""

    num_warps: int
    occupancy: int | None
    live_registers: int


def choose_warps(kernel: Any, sig: tuple[Any, ...],
                 on_warps: Callable[[int], Any]) -> WarpChoice:
    """The warps for `kernel` (a `num_warps="auto"` tile kernel) at signature `sig`;
    `on_warps(n)` is the kernel on n warps. A block too small for a tile (the frontend
    refuses more than 256 elements a thread) is passed over; where every candidate is
    refused, the error of the largest is raised."""
    from oxide.ir.tile_ops import kind_of
    from oxide.tile.frontend import evaluate_body
    from oxide.tile.layouts import LayoutPass
    from oxide.tile.pipeline import choose_engines
    from oxide.tile.register_budget import live_registers

    refused: CompileError | None = None
    live: int | None = None  # at the last candidate the frontend took
    for warps in CANDIDATES:
        trial = on_warps(warps)
        try:
            b, low, _ = evaluate_body(trial, sig, kernel.__name__)
        except CompileError as exc:
            refused = exc
            continue
        product = next((op for op in b.tile_ops if kind_of(op) == "mma"), None)
        if product is not None:
            raise UnsupportedFeatureError(
                "num_warps=\"auto\" chooses the warps of kernels without products; this "
                "kernel has `tile.mma`", b.spans.get(product),
                hint="give the warps: `@tile.kernel(num_warps=8)` (two warp groups on Hopper, "
                     "or 4), or ox.autotune over num_warps")
        choose_engines(b.tile_ops, warps, True, False)
        LayoutPass(b, warps, low.vector, True).run()
        live = live_registers(b)[0]
        if live <= LIVE_TARGET:
            return WarpChoice(warps, SM_THREADS // 2 // (32 * warps), live)
    if live is None:
        assert refused is not None
        raise refused
    return WarpChoice(CANDIDATES[-1], None, live)


def remembered_choice(kernel: Any, sig: tuple[Any, ...]) -> WarpChoice | None:
    """The choice an earlier process stored for `kernel` at `sig`, or None (none stored,
    nothing on disk, or anything in doubt: the choice is then made again)."""
    import json

    from oxide.runtime.safe_read import read_regular_file

    path = _memo_path(kernel, sig)
    if path is None:
        return None
    try:
        data = json.loads(read_regular_file(path, 4096))
        choice = WarpChoice(data["num_warps"], data["occupancy"], data["live_registers"])
        if data["format"] != MEMO_FORMAT or choice.num_warps not in CANDIDATES:
            return None
        if choice.occupancy is not None and not (isinstance(choice.occupancy, int)
                                                 and 1 <= choice.occupancy <= 32):
            return None
        return choice
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember_choice(kernel: Any, sig: tuple[Any, ...], choice: WarpChoice) -> None:
    """Store `choice` for `remembered_choice` (nothing where the disk refuses: the memo is
    an optimization)."""
    import dataclasses
    import json

    from oxide.runtime import cache_layout

    path = _memo_path(kernel, sig)
    if path is not None:
        data = {"format": MEMO_FORMAT, "kernel": kernel.__qualname__,
                **dataclasses.asdict(choice)}
        cache_layout.write(path.parent.parent, f"warps/{path.name}", json.dumps(data).encode())


def _memo_path(kernel: Any, sig: tuple[Any, ...]) -> Any:
    from oxide.runtime import cache

    text = cache.signature_text(sig)
    return None if text is None else cache.choice_path(
        "warps", f"oxide-auto-warps-{MEMO_FORMAT}", kernel, text)
