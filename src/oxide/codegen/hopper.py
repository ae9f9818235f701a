"""NVPTX emission of inline PTX and of the tensor-core / Hopper primitives.

Each `oxide.hopper` op becomes one LLVM NVVM intrinsic (all of these exist in LLVM 22:
`mma`, `ldmatrix`, `stmatrix`, `mbarrier.*`, the fences, `elect.sync`, `setmaxnreg`,
`barrier.cta.sync.count` and `.arrive.count`, the cluster registers and barrier, wgmma's fence and commit),
and `oxide.inline_asm` an LLVM `asm` call, as are `wgmma.mma_async` and wgmma's wait
(LLVM 22 has no intrinsic for the first; the second must carry the accumulators). Before
any of that, the target is checked here: LLVM aborts the whole process on an intrinsic it
cannot select for the architecture (TOOLCHAIN-NOTES), so a primitive the target lacks is
a `TargetError` naming the call, raised while the LLVM IR text is still being written.
The CPU target computes mma.sync, ldmatrix, stmatrix and wgmma itself (exact loops, at
the end of this module), and mbarriers and TMA copies in codegen/hopper_cpu.py; it has
none of the others.
"""

from __future__ import annotations

from typing import Any

from oxide import types as T
from oxide.codegen.hopper_address import element_address, tma_address
from oxide.errors import InternalCompilerError, TargetError
from oxide.ir import ops
from oxide.ir.types import dtype_of_ir

# kind prefix -> (the oldest architecture that has it, whether it needs the `a` variant)
_REQUIRES: tuple[tuple[str, int, bool], ...] = (
    ("mma.", 80, False), ("ldmatrix.", 80, False), ("stmatrix.", 90, False),
    ("mbarrier.init", 80, False), ("mbarrier.arrive_expect_tx", 90, False),
    ("mbarrier.arrive_cluster", 90, False),
    ("mbarrier.arrive", 80, False), ("mbarrier.", 90, False), ("fence.", 90, False),
    ("elect_sync", 90, False), ("setmaxnreg.", 90, True), ("named_barrier", 80, False),
    ("sreg.", 90, False), ("cluster.", 90, False), ("wgmma.m64n", 90, True),
    ("wgmma.desc", 90, True), ("wgmma.fence", 90, True), ("wgmma.commit", 90, True),
    ("wgmma.pack", 90, True),
    ("wgmma.wait", 90, True), ("tma.", 90, False), ("cp_async.", 80, False),
)
# kind prefix -> the name users wrote
_NAMES = (("wgmma.desc", "ox.wgmma_desc()"), ("wgmma.fence", "ox.wgmma_fence()"),
          ("wgmma.commit", "ox.wgmma_commit()"), ("wgmma.wait", "ox.wgmma_wait()"),
          ("wgmma.pack", "a tile product's A from registers"),
          ("wgmma.m64n", "ox.wgmma()"), ("mma.", "ox.mma_sync()"), ("ldmatrix.", "ox.ldmatrix()"),
          ("stmatrix.", "ox.stmatrix()"), ("mbarrier.", "ox.mbarrier.{}()"),
          ("fence.proxy_async", "ox.fence_proxy_async()"),
          ("fence.mbarrier_init", "ox.fence_mbarrier_init()"),
          ("elect_sync", "ox.elect_sync()"), ("setmaxnreg.", "ox.setmaxnreg()"),
          ("named_barrier", "ox.named_barrier_sync()"), ("sreg.", "ox.cluster registers"),
          ("cluster.", "the cluster barrier"), ("tma.load", "ox.tma.load()"),
          ("tma.barrier", "ox.tma.load()"), ("tma.store", "ox.tma.store()"),
          ("tma.reduce_add", "a tile atomic_add by TMA"),
          ("tma.prefetch_descriptor", "ox.tma.prefetch_descriptor()"),
          ("tma.prefetch", "ox.tma.prefetch()"), ("tma.commit_group", "ox.tma.commit_group()"),
          ("tma.wait_group_read", "ox.tma.wait_group_read()"),
          ("tma.wait_group", "ox.tma.wait_group()"),
          ("cp_async.", "a tile product's operand copies (cp.async)"))
_MMA = {"mma.m16n8k16.bf16": "llvm.nvvm.mma.m16n8k16.row.col.bf16",
        "mma.m16n8k16.f16": "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
        "mma.m16n8k8.tf32": "llvm.nvvm.mma.m16n8k8.row.col.tf32"}
_MBARRIER = {"init": ("llvm.nvvm.mbarrier.init.shared", "void"),
             "arrive": ("llvm.nvvm.mbarrier.arrive.shared", "i64"),
             "arrive_expect_tx": ("llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta",
                                  "i64"),
             "try_wait_parity": ("llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta",
                                 "i1")}
_P3 = "ptr addrspace(3)"
# What the CPU target computes itself (warp collectives built from its warp shuffles).
CPU_EMULATED = ("mma", "ldmatrix", "stmatrix")


def _known_nvvm() -> frozenset[str]:
    """Every NVVM intrinsic this module may call, each checked to exist in LLVM 22.1 (an
    unknown `llvm.nvvm.*` name is not rejected by LLVM: it becomes a call to an undefined
    function that fails only when the cubin is linked)."""
    names = set(_MMA.values()) | {name for name, _ in _MBARRIER.values()}
    for op in ("ldmatrix", "stmatrix"):
        for n in ("x1", "x2", "x4"):
            for trans in ("", ".trans"):
                names.add(f"llvm.nvvm.{op}.sync.aligned.m8n8.{n}{trans}.b16.p3")
    names |= {f"llvm.nvvm.read.ptx.sreg.{r}" for r in (
        "cluster.ctarank", "cluster.nctarank", *(f"{reg}.{a}" for a in "xyz" for reg in (
            "cluster.ctaid", "cluster.nctaid", "clusterid", "nclusterid")))}
    names |= {"llvm.nvvm.fence.proxy.async.shared_cta",
              "llvm.nvvm.fence.mbarrier_init.release.cluster", "llvm.nvvm.elect.sync",
              "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32",
              "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32", "llvm.nvvm.barrier.cta.sync.count",
              "llvm.nvvm.barrier.cta.arrive.count",
              "llvm.nvvm.barrier.cluster.arrive", "llvm.nvvm.barrier.cluster.wait",
              "llvm.nvvm.wgmma.fence.sync.aligned", "llvm.nvvm.wgmma.commit_group.sync.aligned",
              "llvm.nvvm.cp.async.bulk.commit.group", "llvm.nvvm.cp.async.bulk.wait.group",
              "llvm.nvvm.cp.async.bulk.wait.group.read", "llvm.nvvm.prefetch.tensormap.p0",
              "llvm.nvvm.cp.async.commit.group", "llvm.nvvm.cp.async.wait.group"}
    for rank in range(1, 6):
        names |= {f"llvm.nvvm.cp.async.bulk.tensor.{op}.tile.{rank}d"
                  for op in ("g2s", "s2g", "reduce.add", "prefetch")}
    return frozenset(names)


def _nvvm(em: Any, name: str, ret: str, args: list[tuple[str, str]]) -> str:
    """`em.intrinsic` for a name from KNOWN_NVVM only: anything else is an oxide bug,
    caught here before LLVM (or ptxas) sees it."""
    if name not in KNOWN_NVVM:
        raise InternalCompilerError(f"oxide emitted an unknown NVVM intrinsic `{name}`")
    return em.intrinsic(name, ret, args)


def requirement(kind: str) -> tuple[int, bool]:
    """(oldest sm, needs the arch-specific `a` target) for an `oxide.hopper` kind."""
    for prefix, sm, arch_specific in _REQUIRES:
        if kind.startswith(prefix):
            return sm, arch_specific
    raise TargetError(f"oxide has no GPU primitive `{kind}`")  # a frontend bug: never PTX


KNOWN_NVVM = _known_nvvm()


def needs_arch_specific(func: Any) -> bool:
    """Whether `func` uses an instruction only the `a` targets have (sm_90a: setmaxnreg)."""
    return any(isinstance(op, ops.HopperOp) and requirement(op.kind.data)[1]
               for op in func.walk())


def user_name(kind: str) -> str:
    for prefix, name in _NAMES:
        if kind.startswith(prefix):
            return name.format(kind.split(".", 1)[-1])
    return kind


def _span(em: Any, op: Any) -> Any:
    where = em.origins.get(op)
    return where[-1] if where else None


def check_target(em: Any, op: Any, kind: str, what: str) -> None:
    """Raise TargetError (at the call) where the target cannot run `op`."""
    if em.t.name != "nvptx":
        raise TargetError(f"{what} runs only on NVIDIA GPUs: the CPU target has no "
                          "equivalent", _span(em, op),
                          hint="compile this kernel for a GPU (arch='sm_90'), or keep the "
                               "primitive in a kernel that only runs there")
    if kind == "asm":
        return
    sm, arch_specific = requirement(kind)
    arch = em.t.arch
    if em.t.sm < sm or (arch_specific and not arch.endswith("a")):
        need = f"sm_{sm}{'a' if arch_specific else ''}"
        hint = ("oxide compiles kernels that use it for sm_90a when the GPU is sm_90 "
                "(H100, H200); other GPUs lack it" if arch_specific else
                f"compile for {need} or newer (arch='{need}'), or take another path on "
                "older GPUs")
        raise TargetError(f"{what} needs {need}; the target is {arch}", _span(em, op),
                          hint=hint)


# -- inline PTX ----------------------------------------------------------------------

def _llvm_string(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):02X}"
                   for c in text)


def _asm_type(dt: T.DType) -> str:
    """bf16 travels through an `h` register as its i16 bits."""
    return "i16" if dt.name == "bf16" else dt.llvm


def emit_inline_asm(em: Any, op: ops.InlineAsmOp) -> None:
    check_target(em, op, "asm", "inline PTX (ox.asm)")
    args = []
    for a in op.args:
        dt = dtype_of_ir(a.type)
        v = em.v(a)
        if dt.name == "bf16":
            v = em.ins(f"bitcast bfloat {v} to i16")
        args.append(f"{_asm_type(dt)} {v}")
    outs = [dtype_of_ir(r.type) for r in op.res]
    if not outs:
        ret = "void"
    elif len(outs) == 1:
        ret = _asm_type(outs[0])
    else:
        ret = em.struct_type([_asm_type(d) for d in outs])
    side = "sideeffect " if op.side_effects.data else ""
    call = (f'call {ret} asm {side}"{_llvm_string(op.template.data)}", '
            f'"{_llvm_string(op.constraints.data)}"({", ".join(args)})')
    if not outs:
        em.raw(call)
        return
    value = em.ins(call)
    for k, (r, dt) in enumerate(zip(op.res, outs, strict=True)):
        v = value if len(outs) == 1 else em.ins(f"extractvalue {ret} {value}, {k}")
        if dt.name == "bf16":
            v = em.ins(f"bitcast i16 {v} to bfloat")
        em.names[r] = v


# -- oxide.hopper ----------------------------------------------------------------------

def emit_hopper(em: Any, op: ops.HopperOp) -> None:
    kind = op.kind.data
    head = kind.split(".")[0]
    results = list(op.res)
    if em.t.name == "cpu" and head in CPU_EMULATED:  # exact, through warp shuffles
        values = _cpu_mma(em, kind, op) if head == "mma" else _cpu_matrix(em, kind, op)
        for r, v in zip(results, values, strict=True):
            em.names[r] = v
        return
    if em.t.name == "cpu" and head == "wgmma":  # exact loops (a CPU warp group's meaning)
        for r, v in zip(results, _cpu_wgmma(em, kind, op), strict=True):
            em.names[r] = v
        return
    if em.t.name == "cpu" and (head == "tma" or head == "mbarrier"):  # copies, counters
        from oxide.codegen import hopper_cpu

        values = (hopper_cpu.tma(em, kind, op) if head == "tma"
                  else hopper_cpu.mbarrier(em, kind.split(".", 1)[1], op))
        for r, v in zip(results, values, strict=True):
            em.names[r] = v
        return
    if em.t.name == "cpu" and head == "cp_async":  # the CPU's copies are made at once
        return
    if em.t.name == "cpu" and head in ("sreg", "fence"):
        # CPU launches form no clusters: each block is a cluster of one, as on a GPU
        # launched without them. There is no async proxy to fence against.
        if head == "sreg":
            em.names[results[0]] = _cpu_cluster_register(em, kind[5:])
        return
    check_target(em, op, kind, f"`{user_name(kind)}`" if "()" in user_name(kind)
                 else user_name(kind))
    if head == "mma":
        values = _mma(em, kind, op)
    elif head in ("ldmatrix", "stmatrix"):
        values = _matrix(em, kind, op)
    elif head == "mbarrier":
        values = _mbarrier(em, kind.split(".", 1)[1], op)
    elif head == "wgmma":
        values = _wgmma(em, kind, op)
    elif head == "tma":
        values = _tma(em, kind, op)
    else:
        values = _simple(em, kind, op)
    for r, v in zip(results, values, strict=True):
        em.names[r] = v


def _pack_halves(em: Any, dt: T.DType, lo: str, hi: str) -> str:
    vec = f"<2 x {dt.llvm}>"
    v = em.ins(f"insertelement {vec} poison, {dt.llvm} {lo}, i32 0")
    v = em.ins(f"insertelement {vec} {v}, {dt.llvm} {hi}, i32 1")
    return em.ins(f"bitcast {vec} {v} to i32")


def _as_i32(em: Any, dt: T.DType, v: str) -> str:
    return em.ins(f"bitcast float {v} to i32") if dt.name == "f32" else v


def _mma_registers(em: Any, ab: list[tuple[T.DType, str]]) -> list[str]:
    """mma.sync's A and B operands as its i32 registers: a 16-bit float and the one after
    it packed into one (the lower index in the low bits), any other value as it is (a
    register of ldmatrix, a tf32 bit pattern). The tile lowering passes A as halves
    from registers and B as ldmatrix registers."""
    regs, k = [], 0
    while k < len(ab):
        dt, v = ab[k]
        if dt.bits == 16 and dt.is_float:
            regs.append(_pack_halves(em, dt, v, ab[k + 1][1]))
            k += 2
        else:
            regs.append(_as_i32(em, dt, v))
            k += 1
    return regs


def _mma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    """One mma.sync: A and B as the intrinsic's registers (packed pairs of halves or
    tf32 bit patterns in i32; f16 pairs as <2 x half>), C as four floats."""
    args = [(dtype_of_ir(a.type), em.v(a)) for a in op.args]
    ab, c = args[:-4], args[-4:]
    regs = _mma_registers(em, ab)
    reg_t = "i32"
    if kind.endswith(".f16"):
        regs = [em.ins(f"bitcast i32 {r} to <2 x half>") for r in regs]
        reg_t = "<2 x half>"
    ret = "{ float, float, float, float }"
    r = _nvvm(em, _MMA[kind], ret, [(reg_t, x) for x in regs] + [("float", v) for _, v in c])
    return [em.ins(f"extractvalue {ret} {r}, {k}") for k in range(4)]


def _matrix(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    """ldmatrix / stmatrix m8n8 b16: each lane gives one 8-element row's address."""
    name, count, *trans = kind.split(".")
    n = int(count[1:])
    intr = f"llvm.nvvm.{name}.sync.aligned.m8n8.{count}{'.trans' if trans else ''}.b16.p3"
    addr = element_address(em, op, row=8)
    if name == "stmatrix":
        _nvvm(em, intr, "void", [(_P3, addr)] + [("i32", em.v(a)) for a in op.args])
        return []
    if n == 1:
        return [_nvvm(em, intr, "i32", [(_P3, addr)])]
    ret = "{ " + ", ".join(["i32"] * n) + " }"
    r = _nvvm(em, intr, ret, [(_P3, addr)])
    return [em.ins(f"extractvalue {ret} {r}, {k}") for k in range(n)]


def _mbarrier(em: Any, name: str, op: ops.HopperOp) -> list[str]:
    addr = element_address(em, op)
    args = [(_P3, addr)] + [("i32", em.v(a)) for a in op.args]
    if name == "arrive_cluster":  # the peer's barrier at the same offset (inline PTX: one
        # string for mapa and the arrive, whatever LLVM's PTX version). The cluster scope
        # costs a GPU-wide fence per arrive in ptxas's code (MEMBAR.ALL.GPU, ERRBAR,
        # CGAERRBAR); `scope="cta"` (imm 1) is the release of the block's own accesses.
        cta = bool(op.imm.data and op.imm.data[0].data)  # type: ignore[attr-defined]
        sem = "" if cta else ".release.cluster"
        shared = em.ins(f"ptrtoint {_P3} {addr} to i32")
        em.raw(f'call void asm sideeffect "{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, '
               f'$0, $1; mbarrier.arrive{sem}.shared::cluster.b64 _, [ra]; }}", '
               f'"r,r,~{{memory}}"(i32 {shared}, i32 {em.v(op.args[0])})')
        return []
    if name == "wait_parity":  # spin on try_wait (which itself waits a bounded time)
        intr, ret = _MBARRIER["try_wait_parity"]
        head, done = em.label(), em.label()
        em.raw(f"br label %{head}")
        em.start_block(head)
        ready = _nvvm(em, intr, ret, args)
        em.raw(f"br i1 {ready}, label %{done}, label %{head}")
        em.start_block(done)
        return []
    intr, ret = _MBARRIER[name]
    r = _nvvm(em, intr, ret, args)
    return [] if ret == "void" else [r]


def _simple(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    args = [("i32", em.v(a)) for a in op.args]
    if kind == "fence.proxy_async":
        _nvvm(em, "llvm.nvvm.fence.proxy.async.shared_cta", "void", [])
    elif kind == "fence.mbarrier_init":
        _nvvm(em, "llvm.nvvm.fence.mbarrier_init.release.cluster", "void", [])
    elif kind == "elect_sync":
        pair = _nvvm(em, "llvm.nvvm.elect.sync", "{ i32, i1 }", [("i32", "-1")])
        return [em.ins(f"extractvalue {{ i32, i1 }} {pair}, 1")]
    elif kind.startswith("setmaxnreg."):
        n = op.imm.data[0].data  # type: ignore[attr-defined]
        _nvvm(em, f"llvm.nvvm.{kind}.sync.aligned.u32", "void", [("i32", str(n))])
    elif kind == "named_barrier":
        _nvvm(em, "llvm.nvvm.barrier.cta.sync.count", "void", args)
    elif kind == "named_barrier.arrive":  # counts toward the barrier, without waiting
        _nvvm(em, "llvm.nvvm.barrier.cta.arrive.count", "void", args)
    elif kind == "cp_async.commit":
        _nvvm(em, "llvm.nvvm.cp.async.commit.group", "void", [])
    elif kind == "cp_async.wait":  # this thread's copies but the `n` latest groups landed
        n = op.imm.data[0].data  # type: ignore[attr-defined]
        _nvvm(em, "llvm.nvvm.cp.async.wait.group", "void", [("i32", str(n))])
    elif kind.startswith("sreg."):
        return [_nvvm(em, f"llvm.nvvm.read.ptx.sreg.{kind[5:]}", "i32", [])]
    elif kind in ("cluster.arrive", "cluster.wait"):
        _nvvm(em, f"llvm.nvvm.barrier.{kind}", "void", [])
    else:
        raise TargetError(f"oxide has no GPU primitive `{kind}`")
    return []


# -- TMA --------------------------------------------------------------------------------
#
# cp.async.bulk.tensor through the LLVM 22 intrinsics (TOOLCHAIN-NOTES): the tensor map is
# the kernel's by-value grid-constant parameter, whose generic address (cvta.param) TMA
# takes; coordinates go innermost first (the frontend has them outermost first). A shared
# array TMA writes or reads is aligned to 1024 bytes: 128 is TMA's own rule, and 1024 puts
# the 128-byte swizzle's pattern at the array's first element (the swizzle is in the
# tensor map, not known here), as wgmma's descriptors and the CPU's copies assume.

TMA_ALIGN = 1024
_P7 = "ptr addrspace(7)"


def _tma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    name = kind.split(".")[1]
    if name == "barrier":
        return [em.ins(f"ptrtoint {_P3} {element_address(em, op)} to i64")]
    if name == "commit_group":
        _nvvm(em, "llvm.nvvm.cp.async.bulk.commit.group", "void", [])
        return []
    if name in ("wait_group", "wait_group_read"):
        n = op.imm.data[0].data  # type: ignore[attr-defined]
        suffix = ".read" if name == "wait_group_read" else ""
        _nvvm(em, f"llvm.nvvm.cp.async.bulk.wait.group{suffix}", "void", [("i32", str(n))])
        return []
    args = [em.v(a) for a in op.args]
    tmap = ("ptr", args[0])
    if name == "prefetch_descriptor":
        _nvvm(em, "llvm.nvvm.prefetch.tensormap.p0", "void", [tmap])
        return []
    rank = int(kind.split(".")[2][:-1])
    if name == "prefetch":
        coords = [("i32", c) for c in reversed(args[1:1 + rank])]
        _nvvm(em, f"llvm.nvvm.cp.async.bulk.tensor.prefetch.tile.{rank}d", "void",
              [tmap, *coords, ("i64", "0"), ("i1", "false")])
        return []
    _align_shared(em, op.array[0], TMA_ALIGN)
    smem = tma_address(em, op)
    if name in ("store", "reduce_add"):  # reduce_add: each element added, relaxed.gpu
        coords = [("i32", c) for c in reversed(args[1:1 + rank])]
        copy = "s2g" if name == "store" else "reduce.add"
        _nvvm(em, f"llvm.nvvm.cp.async.bulk.tensor.{copy}.tile.{rank}d", "void",
              [(_P3, smem), tmap, *coords, ("i64", "0"), ("i1", "false")])
        return []
    bar = em.ins(f"inttoptr i64 {args[1]} to {_P3}")
    coords = [("i32", c) for c in reversed(args[2:2 + rank])]
    multicast = kind.endswith(".multicast")
    mask = args[2 + rank] if multicast else "0"
    dst = em.ins(f"addrspacecast {_P3} {smem} to {_P7}")
    _nvvm(em, f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{rank}d", "void",
          [(_P7, dst), (_P3, bar), tmap, *coords, ("i16", mask), ("i64", "0"),
           ("i1", "true" if multicast else "false"), ("i1", "false"), ("i32", "0")])
    return []


# -- wgmma ------------------------------------------------------------------------------
#
# LLVM 22 has intrinsics for wgmma's fence and commit but none for `wgmma.mma_async`, so
# the multiply-add is inline asm whose accumulators are outputs tied to the inputs (one
# register each, no copies in a K loop). The wait is inline asm too, carrying the
# accumulators the same way: a read of a result then depends on the wait, and LLVM cannot
# hoist it above (a `wait_group` intrinsic orders nothing for pure register reads). Both
# are `sideeffect` with a memory clobber, so shared-memory writes stay on their side.

def _tied_asm(em: Any, template: str, ins: list[tuple[str, str]], acc: list[str],
              ty: str = "float", memory: bool = True) -> list[str]:
    """`asm sideeffect` with len(acc) outputs of type `ty` ($0...), then `ins`, then `acc`
    tied to the outputs, a memory clobber where `memory`; returns the outputs."""
    n = len(acc)
    letters = {"i64": "l", "i32": "r", "float": "f"}
    constraints = ",".join([f"={letters[ty]}"] * n + [letters[t] for t, _ in ins]
                           + [str(k) for k in range(n)] + (["~{memory}"] if memory else []))
    args = ", ".join([f"{t} {v}" for t, v in ins] + [f"{ty} {v}" for v in acc])
    if n == 0:
        em.raw(f'call void asm sideeffect "{_llvm_string(template)}", "{constraints}"({args})')
        return []
    ret = ty if n == 1 else em.struct_type([ty] * n)
    value = em.ins(f'call {ret} asm sideeffect "{_llvm_string(template)}", '
                   f'"{constraints}"({args})')
    if n == 1:
        return [value]
    return [em.ins(f"extractvalue {ret} {value}, {k}") for k in range(n)]


def _wgmma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    if kind == "wgmma.fence":
        _nvvm(em, "llvm.nvvm.wgmma.fence.sync.aligned", "void", [])
        return []
    if kind == "wgmma.commit":
        _nvvm(em, "llvm.nvvm.wgmma.commit_group.sync.aligned", "void", [])
        return []
    imm = [a.data for a in op.imm.data]  # type: ignore[attr-defined]
    if kind == "wgmma.wait":
        acc = [em.v(a) for a in op.args]
        regs = ", ".join(f"${k}" for k in range(len(acc)))
        note = f"// the accumulators wait: {regs}\n\t" if acc else ""
        return _tied_asm(em, f"{note}wgmma.wait_group.sync.aligned {imm[0]};", [], acc)
    if kind == "wgmma.desc":
        return [_wgmma_desc(em, op, *imm)]
    if kind == "wgmma.pack":
        return _wgmma_pack(em, op, pinned=True)
    _, shape, dt, form = kind.split(".")
    em.inline_reports = True  # a report call would serialize every wgmma (C7509)
    n = len(op.res)
    args = [em.v(a) for a in op.args]
    guard = None
    if _guarded(imm):  # the guard follows the scale: take it out of the argument list
        guard = args.pop(len(args) - n - 1)
    n_a = 1 if form == "ss" else 4
    a_args = args[:n_a]
    if form == "rs" and len(args) - 2 - n == 8:  # 8 halves: pack pairs
        halves = [(dtype_of_ir(op.args[k].type), args[k]) for k in range(8)]
        a_args = [_pack_halves(em, halves[k][0], halves[k][1], halves[k + 1][1])
                  for k in range(0, 8, 2)]
        n_a_in = 8
    else:
        n_a_in = n_a
    b, scale = args[n_a_in], args[n_a_in + 1]
    acc = args[n_a_in + 2:]
    ins = ([("i64", a_args[0])] if form == "ss" else [("i32", x) for x in a_args])
    ins += [("i64", b), ("i32", scale)] + ([("i32", guard)] if guard is not None else [])
    d = "{" + ", ".join(f"${k}" for k in range(n)) + "}"
    a_text = f"${n}" if form == "ss" else "{" + ", ".join(f"${n + k}" for k in range(4)) + "}"
    b_text, s_text = f"${n + len(a_args)}", f"${n + len(a_args) + 1}"
    trans = f"{imm[0]}, {imm[1]}" if form == "ss" else f"{imm[1]}"
    if dt in ("e4m3", "e5m2"):  # 8-bit operands are K-major: no transpose operands
        trans = ""
    # a guarded instruction is predicated, not branched around: a wgmma whose registers
    # meet at a branch's join makes ptxas inject a warp-group arrive there (C7519)
    issue = ""
    if guard is not None:
        issue = f".reg .pred g;\n\tsetp.ne.b32 g, ${n + len(a_args) + 2}, 0;\n\t@g "
    template = (f"{{\n\t.reg .pred p;\n\tsetp.ne.b32 p, {s_text}, 0;\n\t{issue}"
                f"wgmma.mma_async.sync.aligned.{shape}.f32.{dt}.{dt} {d}, {a_text}, "
                f"{b_text}, p, 1, 1{', ' if trans else ''}{trans};\n}}")
    return _tied_asm(em, template, ins, acc)


def _wgmma_pack(em: Any, op: ops.HopperOp, pinned: bool) -> list[str]:
    """`wgmma.pack`: pairs of 16-bit floats (`args`) as the i32 registers an `rs` wgmma
    reads (the lower index in the low bits). Why an op of its own: ptxas must not see a
    register an in-flight wgmma reads being written between the wgmma of one chain, or
    it inserts a warp-group arrive there, and where that is on a path it deems
    divergent it serializes every wgmma of the kernel (note C7519). Packed here, before
    the chain's `wgmma.fence`, and `pinned` on the GPU by an empty `asm sideeffect`
    through which every register passes, LLVM cannot sink a conversion down between
    the instructions."""
    halves = [(dtype_of_ir(a.type), em.v(a)) for a in op.args]
    packed = [_pack_halves(em, halves[k][0], halves[k][1], halves[k + 1][1])
              for k in range(0, len(halves), 2)]
    return _tied_asm(em, "", [], packed, "i32", memory=False) if pinned else packed


def _wgmma_desc(em: Any, op: ops.HopperOp, layout: int, lbo: int, sbo: int) -> str:
    """bits 0-13: the start address >> 4; 16-29: LBO >> 4; 32-45: SBO >> 4; 62-63: the
    swizzle. A swizzled operand must start its pattern at a 1024-byte boundary (base
    offset 0): the array is aligned so, and its rows are one swizzle row each."""
    _align_shared(em, op.array[0], 1024)
    addr = element_address(em, op)
    a = em.ins(f"ptrtoint {_P3} {addr} to i64")
    a = em.ins(f"lshr i64 {em.ins(f'and i64 {a}, 262143')}, 4")
    const = (lbo << 16) | (sbo << 32) | (layout << 62)
    if const >= 1 << 63:
        const -= 1 << 64
    return em.ins(f"or i64 {a}, {const}")


def _align_shared(em: Any, array: Any, align: int) -> None:
    """Raise the alignment of a static shared array's global (codegen/nvptx.py declares
    them `align 16`)."""
    ptr = em.arrays[array]["ptr"]
    for k, g in enumerate(em.globals):
        if g.startswith(f"{ptr} = ") and g.endswith(", align 16"):
            em.globals[k] = g[:-len("16")] + str(align)


# -- the CPU's meaning of the warp-level matrix instructions ------------------------------
#
# mma.sync, ldmatrix and stmatrix are warp collectives with a fixed data layout, so the CPU
# target builds them from its warp shuffles (codegen/cpu_sync.py): each lane gathers the
# fragment elements its results need from the lanes that hold them, then computes or moves
# them itself. A full warp must take part, as on the GPU (a lane missing from a partial
# last warp makes the results meaningless, not unsafe).

def _cpu_shuffle(em: Any, dt: T.DType, v: str, src: str) -> str:
    return em.t.warp(em, "shuffle", [(dt, v), (T.i32, src), (T.u32, "-1")], dt)


def _lane_parts(em: Any) -> tuple[str, str, str]:
    lane = em.reg("laneid")
    return lane, em.ins(f"lshr i32 {lane}, 2"), em.ins(f"and i32 {lane}, 3")


def _half_as_float(em: Any, dt: T.DType, packed: str, high: bool) -> str:
    bits = em.ins(f"lshr i32 {packed}, 16") if high else packed
    h = em.ins(f"trunc i32 {bits} to i16")
    return em.ins(f"fpext {dt.llvm} {em.ins(f'bitcast i16 {h} to {dt.llvm}')} to float")


def _cpu_mma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    """D = A @ B + C for the lane's four D elements: the A rows (g, g + 8) and B columns
    (2t, 2t + 1) it needs come from the lanes holding them (PTX's fragment layouts), then
    a sequential f32 sum over k (products of halves and of tf32 values are exact in f32)."""
    args = [(dtype_of_ir(a.type), em.v(a)) for a in op.args]
    ab, c = args[:-4], [v for _, v in args[-4:]]
    half = T.bf16 if kind.endswith("bf16") else T.f16
    regs = _mma_registers(em, ab)
    a, b = regs[:4], regs[4:]
    _, g, t = _lane_parts(em)
    tf32 = kind.endswith("tf32")
    depth = 8 if tf32 else 16
    rows: list[list[str]] = [[""] * depth for _ in range(2)]   # A rows g and g + 8
    cols: list[list[str]] = [[""] * depth for _ in range(2)]   # B columns 2t and 2t + 1
    g4 = em.ins(f"shl i32 {g}, 2")
    col0 = em.ins(f"shl i32 {t}, 3")  # lane 4 * (2t) of column 2t
    for tp in range(4):
        src_a = em.ins(f"add i32 {g4}, {tp}")
        src_b = [em.ins(f"add i32 {col0}, {tp + 4 * n}") for n in range(2)]
        for r in range(4):
            v = _cpu_shuffle(em, T.u32, a[r], src_a)
            if tf32:  # element r: row g + 8 (r % 2), k = tp + 4 (r // 2)
                rows[r % 2][tp + 4 * (r // 2)] = _tf32(em, v)
            else:  # register r: row g + 8 (r % 2), k = 2 tp + 8 (r // 2) and + 1
                for h in range(2):
                    rows[r % 2][2 * tp + 8 * (r // 2) + h] = _half_as_float(em, half, v, h == 1)
        for n in range(2):
            for r in range(2):
                v = _cpu_shuffle(em, T.u32, b[r], src_b[n])
                if tf32:  # element r: k = tp + 4 r
                    cols[n][tp + 4 * r] = _tf32(em, v)
                else:  # register r: k = 2 tp + 8 r and + 1
                    for h in range(2):
                        cols[n][2 * tp + 8 * r + h] = _half_as_float(em, half, v, h == 1)
    out = []
    for e in range(4):
        acc = c[e]
        for k in range(depth):
            p = em.ins(f"fmul float {rows[e // 2][k]}, {cols[e % 2][k]}")
            acc = em.ins(f"fadd float {acc}, {p}")
        out.append(acc)
    return out


def _tf32(em: Any, bits: str) -> str:
    """An f32 read as tf32: its low 13 mantissa bits dropped."""
    return em.ins(f"bitcast i32 {em.ins(f'and i32 {bits}, -8192')} to float")


def _cpu_matrix(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    """ldmatrix / stmatrix: lane l's register j is matrix j's (row l // 4, columns
    2 (l % 4) and + 1), transposed with `.trans`; the row addresses come from lanes
    8j to 8j + 7, each lane's own bounds-checked element."""
    name, count, *trans = kind.split(".")
    n = int(count[1:])
    addr = em.ins(f"ptrtoint ptr {element_address(em, op, row=8)} to i64")
    _, g, t = _lane_parts(em)
    t2 = em.ins(f"shl i32 {t}, 1")
    g64, t64 = em.ins(f"zext i32 {g} to i64"), em.ins(f"zext i32 {t2} to i64")
    out = []
    for j in range(n):
        if trans:  # rows 2t and 2t + 1 of matrix j, column g
            srcs = [em.ins(f"add i32 {t2}, {8 * j + h}") for h in range(2)]
            places = [(_cpu_shuffle(em, T.u64, addr, s), g64) for s in srcs]
        else:  # row g of matrix j, columns 2t and 2t + 1
            row = _cpu_shuffle(em, T.u64, addr, em.ins(f"add i32 {g}, {8 * j}"))
            places = [(row, t64), (row, em.ins(f"add i64 {t64}, 1"))]
        ptrs = []
        for base, offset in places:
            p = em.ins(f"inttoptr i64 {base} to ptr")
            ptrs.append(em.ins(f"getelementptr inbounds i16, ptr {p}, i64 {offset}"))
        if name == "ldmatrix":
            lo, hi = (em.ins(f"zext i16 {em.ins(f'load i16, ptr {q}')} to i32") for q in ptrs)
            out.append(em.ins(f"or i32 {lo}, {em.ins(f'shl i32 {hi}, 16')}"))
        else:
            v = em.v(op.args[j])
            em.raw(f"store i16 {em.ins(f'trunc i32 {v} to i16')}, ptr {ptrs[0]}")
            high = em.ins(f"trunc i32 {em.ins(f'lshr i32 {v}, 16')} to i16")
            em.raw(f"store i16 {high}, ptr {ptrs[1]}")
    return out


def _cpu_cluster_register(em: Any, reg: str) -> str:
    """A cluster register of a block that is a cluster of one."""
    if reg in ("cluster.ctarank",) or reg.startswith("cluster.ctaid."):
        return "0"
    if reg == "cluster.nctarank" or reg.startswith("cluster.nctaid."):
        return "1"
    axis = reg.rsplit(".", 1)[1]
    return em.reg(("ctaid." if reg.startswith("clusterid.") else "nctaid.") + axis)


# -- the CPU's meaning of wgmma ------------------------------------------------------------
#
# A thread's accumulators are its own (row, column) elements of D (the layout of
# docs/language.md), so each thread computes them with exact loops: the A rows it needs
# (from shared memory, or in the RS form from its warp's lanes through shuffles, as
# mma.sync's A), then for each pair of columns the products of each element (16 halves or
# 32 8-bit floats: one instruction's K) summed in order in f32 (products of either are
# exact in f32; the GPU's sums of 8-bit products keep fewer bits: docs/language.md).
# Shared operands are read through
# their descriptor's layout: the swizzle XORs byte-address bits 4-6 (4-5, 4) with bits
# 7-9 (7-8, 7), counted from the array's first element (on the GPU the array is aligned
# to 1024 bytes, so that is the same). The CPU's descriptor is the operand's start
# address; its layout comes from the `ox.wgmma_desc` op itself, which must therefore be
# the operand (written in the call, or assigned just before). The wgmma completes at
# once: fence, commit and wait order nothing there.

_SWIZZLE_MASK = {1: 7, 2: 3, 3: 1}  # descriptor layout code -> the row bits XORed in
_CPU_WGMMA_TYPES = {"bf16": T.bf16, "f16": T.f16, "e4m3": T.f8e4m3, "e5m2": T.f8e5m2}


def _cpu_wgmma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    if kind in ("wgmma.fence", "wgmma.commit"):
        return []
    if kind == "wgmma.wait":
        return [em.v(a) for a in op.args]
    if kind == "wgmma.desc":
        return [em.ins(f"ptrtoint ptr {element_address(em, op)} to i64")]
    if kind == "wgmma.pack":
        return _wgmma_pack(em, op, pinned=False)
    _, shape, dt_name, form = kind.split(".")
    half = _CPU_WGMMA_TYPES[dt_name]
    step = 256 // half.bits  # K of one instruction: 32 bytes of each row
    if form == "rs" and half.bits == 8:
        raise TargetError("on the CPU, ox.wgmma() of 8-bit floats takes A from shared memory "
                          "(the SS form) only", _span(em, op),
                          hint="pass A as `ox.wgmma_desc(...)` of its shared array")
    imm = [a.data for a in op.imm.data]  # type: ignore[attr-defined]
    trans_a, trans_b = imm[:2]
    n = len(op.res)
    args = list(op.args)
    guard = em.v(args.pop(len(args) - n - 1)) if _guarded(imm) else None
    n_a = 1 if form == "ss" else (4 if len(args) - 2 - n == 4 else 8)
    b_desc, scale = args[n_a], em.v(args[n_a + 1])
    acc_in = [em.v(a) for a in args[n_a + 2:]]
    tid = em.t.linear_tid(em)
    lane = em.ins(f"and i32 {tid}, 31")
    warp = em.ins(f"and i32 {em.ins(f'lshr i32 {tid}, 5')}, 3")
    g, q = em.ins(f"lshr i32 {lane}, 2"), em.ins(f"and i32 {lane}, 3")
    r0 = em.ins(f"add i32 {em.ins(f'shl i32 {warp}, 4')}, {g}")
    rows = [r0, em.ins(f"add i32 {r0}, 8")]
    # A's two rows, 16 values each
    if form == "ss":
        a_op = _desc_op(em, op, args[0], "A")
        a_rows = [[_cpu_operand(em, a_op, half, rows[i], str(k), bool(trans_a))
                   for k in range(step)]
                  for i in range(2)]
    else:
        a_rows = _cpu_rs_rows(em, half, [em.v(a) for a in args[:n_a]],
                              [dtype_of_ir(a.type) for a in args[:n_a]], g, q)
    b_op = _desc_op(em, op, b_desc, "B")
    keep = em.ins(f"icmp ne i32 {scale}, 0")
    # the accumulators through memory (freed again: the call may sit in a loop), a loop
    # over the column pairs
    stack = em.intrinsic("llvm.stacksave.p0", "ptr", [])
    buf = em.ins(f"alloca [{n} x float], align 4")
    for e, v in enumerate(acc_in):
        p = em.ins(f"getelementptr inbounds float, ptr {buf}, i64 {e}")
        em.raw(f"store float {em.ins(f'select i1 {keep}, float {v}, float 0.0')}, ptr {p}")
    counter = em.ins("alloca i32, align 4")
    em.raw(f"store i32 0, ptr {counter}")
    head, body, done = em.label(), em.label(), em.label()
    em.raw(f"br label %{head}")
    em.start_block(head)
    j = em.ins(f"load i32, ptr {counter}")
    em.raw(f"br i1 {em.ins(f'icmp ult i32 {j}, {n // 4}')}, label %{body}, label %{done}")
    em.start_block(body)
    col0 = em.ins(f"add i32 {em.ins(f'shl i32 {j}, 3')}, {em.ins(f'shl i32 {q}, 1')}")
    cols = [col0, em.ins(f"add i32 {col0}, 1")]
    b_cols = [[_cpu_operand(em, b_op, half, c, str(k), bool(trans_b))
               for k in range(step)] for c in cols]
    for e in range(4):  # element 4j + e: row (e // 2), column (e % 2)
        idx = em.ins(f"add i32 {em.ins(f'shl i32 {j}, 2')}, {e}")
        p = em.ins(f"getelementptr inbounds float, ptr {buf}, i32 {idx}")
        total = em.ins(f"load float, ptr {p}")
        for k in range(step):
            prod = em.ins(f"fmul float {a_rows[e // 2][k]}, {b_cols[e % 2][k]}")
            total = em.ins(f"fadd float {total}, {prod}")
        em.raw(f"store float {total}, ptr {p}")
    em.raw(f"store i32 {em.ins(f'add i32 {j}, 1')}, ptr {counter}")
    em.raw(f"br label %{head}")
    em.start_block(done)
    out = []
    for e in range(n):
        p = em.ins(f"getelementptr inbounds float, ptr {buf}, i64 {e}")
        out.append(em.ins(f"load float, ptr {p}"))
    em.intrinsic("llvm.stackrestore.p0", "void", [("ptr", stack)])
    if guard is not None:  # not issued: the accumulators as they were
        issued = em.ins(f"icmp ne i32 {guard}, 0")
        out = [em.ins(f"select i1 {issued}, float {v}, float {old}")
               for v, old in zip(out, acc_in, strict=True)]
    return out


def _guarded(imm: list[int]) -> bool:
    """Whether a `wgmma.m64n...` op carries a guard (its third immediate): an i32 after
    its scale operand, the instruction issued only where it is non-zero."""
    return len(imm) > 2 and imm[2] == 1


def _desc_op(em: Any, op: ops.HopperOp, value: Any, which: str) -> ops.HopperOp:
    owner = value.owner
    if isinstance(owner, ops.HopperOp) and owner.kind.data == "wgmma.desc":
        return owner
    raise TargetError(f"on the CPU, {which} of ox.wgmma() must come straight from "
                      "ox.wgmma_desc(): the CPU reads the operand through the descriptor's "
                      "layout, which it knows only from that call", _span(em, op),
                      hint="write `ox.wgmma_desc(s[i, j], ...)` in the ox.wgmma() call")


def _cpu_operand(em: Any, desc: ops.HopperOp, dt: T.DType, mn: str, k: str,
                 mn_major: bool) -> str:
    """One element (M or N index `mn`, K index `k`) of a shared operand of `dt` (a 16- or
    8-bit float), as f32 (exactly).

    K-major: `mn` picks the row, `k` the element in it. MN-major: `k` picks the row of a
    slab of one swizzle row's elements along M/N, the slab is `mn // per_row`."""
    layout, lbo, _ = (a.data for a in desc.imm.data)  # type: ignore[attr-defined]
    info = em.arrays[desc.array[0]]
    base = em.ins(f"ptrtoint ptr {info['ptr']} to i64")
    width = {1: 128, 2: 64, 3: 32}[layout]
    size = dt.bits // 8
    per_row = width // size
    start = em.names[desc.res[0]]  # the start address (the CPU's descriptor)
    rel = em.ins(f"sub i64 {start}, {base}")
    mn64 = em.ins(f"zext i32 {mn} to i64")
    if not mn_major:
        off = em.ins(f"add i64 {em.ins(f'mul i64 {mn64}, {width}')}, {size * int(k)}")
    else:
        slab = em.ins(f"udiv i64 {mn64}, {per_row}")
        inner = em.ins(f"urem i64 {mn64}, {per_row}")
        off = em.ins(f"add i64 {em.ins(f'mul i64 {slab}, {lbo << 4}')}, "
                     f"{int(k) * width}")
        off = em.ins(f"add i64 {off}, {em.ins(f'mul i64 {inner}, {size}')}")
    rel = em.ins(f"add i64 {rel}, {off}")
    bits = em.ins(f"and i64 {em.ins(f'lshr i64 {rel}, 7')}, {_SWIZZLE_MASK[layout]}")
    rel = em.ins(f"xor i64 {rel}, {em.ins(f'shl i64 {bits}, 4')}")
    ptr = em.ins(f"getelementptr inbounds i8, ptr {info['ptr']}, i64 {rel}")
    return em.cast(em.ins(f"load {dt.llvm}, ptr {ptr}"), dt, T.f32)


def _cpu_rs_rows(em: Any, half: T.DType, a: list[str], dts: list[T.DType], g: str,
                 q: str) -> list[list[str]]:
    """The RS form's A rows g and g + 8 of this warp (16 values each), gathered from the
    lanes holding them: mma.sync's m16n8k16 A layout (register r of lane 4g' + q' holds
    row g' + 8 (r % 2), columns 2q' + 8 (r // 2) and + 1)."""
    if len(a) == 8:
        regs = [_pack_halves(em, dts[k], a[k], a[k + 1]) for k in range(0, 8, 2)]
    else:
        regs = a
    rows: list[list[str]] = [[""] * 16 for _ in range(2)]
    g4 = em.ins(f"shl i32 {g}, 2")
    del q
    for tp in range(4):
        src = em.ins(f"add i32 {g4}, {tp}")
        for r in range(4):
            v = _cpu_shuffle(em, T.u32, regs[r], src)
            for h in range(2):
                rows[r % 2][2 * tp + 8 * (r // 2) + h] = _half_as_float(em, half, v, h == 1)
    return rows
