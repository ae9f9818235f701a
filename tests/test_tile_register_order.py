"""A block holding more values than a thread's registers is put in an order that holds
fewer (tile/register_order.py): where it applies, what it keeps in place, and what ptxas
makes of it. Its results are compared bit for bit in test_tile_row_staging.py."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from test_tile_tma_rings import V

import oxide as ox
from oxide import DisjointSlice, Slice, bf16, f32
from oxide.examples.tile_layernorm import tile_layernorm
from oxide.examples.tile_softmax import tile_softmax
from oxide.tile import pipeline, register_order


def _sigs(dt: Any) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    rows = (V(Slice[dt, 2], vectors=True), V(DisjointSlice[dt, 2], vectors=True))
    vec = V(Slice[dt], vectors=True)
    return {"softmax": (tile_softmax, rows),
            "layernorm": (tile_layernorm, (rows[0], vec, vec, rows[1], f32))}


def _ptx(name: str, dt: Any, cols: int) -> str:
    kernel, sig = _sigs(dt)[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ox.PerformanceWarning)
        return kernel.compile(*sig, cols, arch="sm_90").ptx


def _recorded(monkeypatch) -> list[dict[str, Any]]:
    """Each reordered block's peak before and after, the cap, and its ops with effects in
    order before and after."""
    seen: list[dict[str, Any]] = []
    real = register_order.reorder_for_registers

    def record(blocks: Any, cap: int, cells: Any, always: bool = False) -> int:
        blocks = list(blocks)
        before = [(list(b.ops), register_order.peak_values(b, cells)) for b in blocks]
        changed = real(blocks, cap, cells, always)
        for b, (ops, peak) in zip(blocks, before, strict=True):
            if peak > cap:
                def effects(order: list[Any]) -> list[Any]:
                    return [op for op in order if not register_order._floats(op, cells)]
                seen.append({"cap": cap, "before": peak,
                             "after": register_order.peak_values(b, cells),
                             "effects": (effects(ops), effects(list(b.ops))),
                             "same_ops": set(ops) == set(b.ops)})
        return changed

    monkeypatch.setattr(pipeline, "reorder_for_registers", record)
    return seen


@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_a_65536_column_row_holds_what_its_registers_can(monkeypatch, name: str) -> None:
    """32 warps, 64 registers a thread: in the lowering's order the row's values and the
    temporaries beside them are past the cap (the layer norm's `d * d` made for the whole
    row before its sum: twice the cap); reordered, under it. The ops with effects (stores,
    shuffles, barriers) keep their order, and no op is lost or added."""
    seen = _recorded(monkeypatch)
    _ptx(name, f32, 65536)
    assert len(seen) == 1
    block = seen[0]
    assert block["before"] > block["cap"] == 64 and block["after"] <= block["cap"]
    assert block["effects"][0] == block["effects"][1] and block["same_ops"]


@pytest.mark.parametrize("cols", [8192, 32768])
def test_rows_within_the_registers_keep_the_lowerings_order(monkeypatch, cols: int) -> None:
    """Where the tiles live across a reduction fit the budget, nothing is reordered: the
    PTX is the same with the pass switched off."""
    seen = _recorded(monkeypatch)
    for name in ("softmax", "layernorm"):
        on = _ptx(name, bf16, cols)
        monkeypatch.setenv("OXIDE_TILE_REGISTER_ORDER", "0")
        assert _ptx(name, bf16, cols) == on
        monkeypatch.delenv("OXIDE_TILE_REGISTER_ORDER")
    assert seen == []


@pytest.mark.parametrize("dt", [f32, bf16])
def test_ptxas_spills_less(monkeypatch, dt: Any) -> None:
    """nvJitLink's ptxas on the whole-row kernels at 65536 columns: the softmax no longer
    spills (156 bytes a thread in the lowering's order, with row staging), the layer
    norm spills a fraction of what it did (560 / 456 bytes, f32 / bf16, to 48 / 8)."""
    from tools.ptxas_report import ptxas_report

    spills = {}
    for order in ("1", "0"):
        monkeypatch.setenv("OXIDE_TILE_REGISTER_ORDER", order)
        for name in ("softmax", "layernorm"):
            try:
                report = ptxas_report(_ptx(name, dt, 65536), "sm_90a")
            except (OSError, RuntimeError) as exc:  # no nvJitLink library here
                pytest.skip(f"ptxas report unavailable: {exc}")
            spills[name, order] = report["spill_stores"]
    assert spills["softmax", "1"] == 0 < spills["softmax", "0"]
    assert spills["layernorm", "1"] * 4 < spills["layernorm", "0"]
