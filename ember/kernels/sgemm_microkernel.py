"""A float32 GEMM micro-kernel for AVX-512 or AVX2, the 16 x 16 transposing copy that packs transposed operands
for it and a pair split for strided convolutions' inputs, written in LLVM IR and compiled for this CPU with llvmlite.

The micro-kernel keeps an MR x NR block of C in registers over the whole K loop: per k it loads NR values of a B
row, broadcasts MR values of A and issues MR x NR / width FMAs, the register-blocked inner loop of every BLAS (and
of oneDNN's and XNNPACK's generated kernels). The block is the instruction set's (BLOCK, chosen once per process
from the CPU and EMBER_CPU_CAPABILITY): AVX-512, 32 zmm registers, 8 rows x two 16-wide vectors; AVX2, 16 ymm
registers, 4 rows x three 8-wide vectors (12 accumulators, 3 B vectors and a broadcast). Masked loads and stores
let one kernel serve partial column blocks, and `mvalid` partial row blocks. LLVM emits the machine code itself,
so the kernel follows the host (`znver3`, `skylake-avx512`...) whatever OpenBLAS was told: NumPy's OpenBLAS picks
its kernels at load time, and OPENBLAS_CORETYPE=Haswell (set on some AVX-512 machines) holds it to AVX2 at half
the width.

ukr(K, A, ask, asr, B, ldb, C, ldc, nvalid, mvalid, acc, bias): C[r, j] (+)= sum_k A[k * ask + r * asr] *
B[k * ldb + j] for r < mvalid, j < nvalid (<= NR): A packed (ask = MR, asr = 1) or a block read in place,
row-major (ask = 1, asr = its leading dimension: its MR rows are MR streams the prefetchers follow, and
packing them cost a scattered write per value) or transposed (ask = its leading dimension, asr = 1: MR
contiguous values per k), B and C row-major with leading dimensions ldb and ldc. The taps variants (ukr_taps,
ukr_wide_taps) take T and two arrays of T offsets more and sum T such products, over A + aoff[t] and B + boff[t],
before C is touched (the direct convolution's taps).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from ember import config


class Block(NamedTuple):
    """An instruction set's register block: `width` float32 lanes a vector register, `mr` x `nr` the block of C,
    `wide_nr` a wider block's columns for the direct convolution."""

    isa: str  # the LLVM feature that names it: "avx512f", "avx2"
    width: int
    mr: int
    nr: int
    wide_nr: int


# AVX-512: 8 rows (channel counts and batch halves divide evenly; 12 did as well on large products and padded
# 16-row ones to 24) x 32 columns, 16 of the 32 zmm registers, and a wider 8 x 48 in 24 (three B vectors, the same
# eight broadcasts per k) for the direct convolution, whose weight gradients have 3 x C columns (48 for 16
# channels, which the 32-wide block runs in two calls, the second half-masked).
AVX512 = Block("avx512f", 16, 8, 32, 48)
# AVX2: 4 x 24, all 16 ymm registers (12 accumulators, three B vectors, a broadcast). 4 rows divide channel
# counts. 6 x 16 (BLIS's Haswell block) ran the kernel alone faster (76 against 65 GFLOP/s on a Zen 3 core, a
# 16-channel layer's K = 16 over 9 taps) but pads 16 channels to 18, and ResNet-20's layers ran no faster on it;
# 8 x 8 loads a B vector and 8 broadcasts per 8 FMAs and ran them slower. One width serves both blocks: 3 x C
# columns are whole blocks of 24 already.
AVX2 = Block("avx2", 8, 4, 24, 24)
_BY_CAPABILITY = {"avx512": AVX512, "avx2": AVX2}
TRANSPOSE = 16  # the transposing copy's block (two ymm registers a row on AVX2, which LLVM splits)


def _cpu_flags() -> frozenset:
    """The CPU's instruction-set flags as Linux names them (/proc/cpuinfo), empty elsewhere."""
    from ember.kernels.machine import cpu_flags

    return cpu_flags()


def _choose_block() -> Block | None:
    """The widest block this CPU runs, capped by EMBER_CPU_CAPABILITY (as PyTorch's ATEN_CPU_CAPABILITY); None
    where it has neither AVX-512 nor AVX2 with FMA (or no /proc/cpuinfo says so), or the setting says `default`."""
    flags = _cpu_flags()
    allowed = {"auto": ("avx512", "avx2"), "avx512": ("avx512", "avx2"), "avx2": ("avx2",), "default": ()}
    for name in allowed[config.CPU_CAPABILITY.get()]:
        block = _BY_CAPABILITY[name]
        if block.isa in flags and "fma" in flags:
            return block
    return None


BLOCK = _choose_block()  # read once: the block's sizes are compiled into the kernels built on it
_SIZES = BLOCK or AVX512  # where neither runs, the names still exist for the code built on them (which never runs)
MR, NR, WIDE_NR, _WIDTH = _SIZES.mr, _SIZES.nr, _SIZES.wide_nr, _SIZES.width

_lock = threading.Lock()
_state: dict = {}


def microkernel_ir(mr: int = MR, nr: int = NR, width: int = _WIDTH, name: str = "ukr", taps: bool = False) -> str:
    """LLVM IR text of the micro-kernel `name` for an mr x nr block (nr a multiple of `width`). With `taps` it
    takes three more arguments, T and two arrays of T offsets (in values), and sums T products of K, the t-th
    over A + aoff[t] and B + boff[t], in the same registers: a direct convolution's taps in one call, where a call
    per tap loaded and stored the block of C once per tap.

    `name` calls one of two bodies: plain vector loads and stores where the block's columns are whole
    (nvalid = nr), masked ones for a partial block. AVX-512 masks cost nothing, but AVX2 has no mask registers:
    its masked loads take a vector of lane masks that LLVM rebuilt on every k, more work than the FMAs."""
    vec, mask = f"<{width} x float>", f"<{width} x i1>"
    args = ("i64 %K, ptr noalias %A, i64 %ask, i64 %asr, ptr noalias %B, i64 %ldb, ptr noalias %C, i64 %ldc, "
            "i64 %nvalid, i64 %mvalid, i64 %acc, ptr noalias %bias"
            + (", i64 %T, ptr noalias %aoff, ptr noalias %boff" if taps else ""))
    passed = ", ".join(arg.replace("noalias ", "") for arg in args.split(", "))
    out = [f"declare {vec} @llvm.fma.v{width}f32({vec}, {vec}, {vec})",
           f"declare {vec} @llvm.masked.load.v{width}f32.p0(ptr, i32, {mask}, {vec})",
           f"declare void @llvm.masked.store.v{width}f32.p0({vec}, ptr, i32, {mask})",
           f"define void @{name}({args}) #0 {{",
           "entry:",
           f"  %whole = icmp eq i64 %nvalid, {nr}",
           "  br i1 %whole, label %full, label %part",
           "full:",
           f"  call void @{name}.full({passed})",
           "  ret void",
           "part:",
           f"  call void @{name}.part({passed})",
           "  ret void",
           "}"]
    for full in (True, False):
        out += _body_ir(mr, nr, width, f"{name}.{'full' if full else 'part'}", args, taps, full)
    out.append("attributes #0 = { nounwind }")
    return "\n".join(out) + "\n"


def _body_ir(mr: int, nr: int, width: int, name: str, args: str, taps: bool, full: bool) -> list:
    """microkernel_ir's body `name`: with `full` every column live (plain loads and stores), else the lanes past
    nvalid masked off."""
    nv, vec = nr // width, f"<{width} x float>"
    mask = f"<{width} x i1>"

    def load(ptr: str, v: int) -> str:
        if full:
            return f"load {vec}, ptr {ptr}, align 4"
        return f"call {vec} @llvm.masked.load.v{width}f32.p0(ptr {ptr}, i32 4, {mask} %m{v}, {vec} zeroinitializer)"

    def store(value: str, ptr: str, v: int) -> str:
        if full:
            return f"store {vec} {value}, ptr {ptr}, align 4"
        return f"call void @llvm.masked.store.v{width}f32.p0({vec} {value}, ptr {ptr}, i32 4, {mask} %m{v})"

    out = [f"define internal void @{name}({args}) #0 {{", "entry:"]
    if not full:  # lane j of vector v is live when v * width + j < nvalid (an i32 compare: one register of lane
        # masks for AVX2, where i64 lanes took two)
        out += ["  %nvalid32 = trunc i64 %nvalid to i32",
                f"  %nv.1 = insertelement <{width} x i32> poison, i32 %nvalid32, i32 0",
                f"  %nv = shufflevector <{width} x i32> %nv.1, <{width} x i32> poison, <{width} x i32> zeroinitializer"]
        for v in range(nv):
            lanes = ", ".join(f"i32 {v * width + j}" for j in range(width))
            out.append(f"  %m{v} = icmp slt <{width} x i32> <{lanes}>, %nv")
    for r in range(mr):  # row r of A starts r * asr values in
        out.append(f"  %ar{r} = mul i64 %asr, {r}")
    if taps:  # an outer loop over the taps, the sums carried from one to the next
        out += ["  %nok = icmp sle i64 %K, 0", "  %not = icmp sle i64 %T, 0", "  %empty = or i1 %nok, %not",
                "  br i1 %empty, label %zero, label %tap", "tap:",
                "  %t = phi i64 [0, %entry], [%t.next, %tap.end]"]
        for r in range(mr):
            for v in range(nv):
                out.append(f"  %e{r}.{v} = phi {vec} [zeroinitializer, %entry], [%f{r}.{v}, %tap.end]")
        out += ["  %aop = getelementptr i64, ptr %aoff, i64 %t", "  %ao = load i64, ptr %aop, align 8",
                "  %bop = getelementptr i64, ptr %boff, i64 %t", "  %bo = load i64, ptr %bop, align 8",
                "  %At = getelementptr float, ptr %A, i64 %ao", "  %Bt = getelementptr float, ptr %B, i64 %bo",
                "  br label %loop"]
        start, a_ptr, b_ptr, loop_exit = "%tap", "%At", "%Bt", "%tap.end"
    else:
        out += ["  %empty = icmp sle i64 %K, 0", "  br i1 %empty, label %zero, label %loop"]
        start, a_ptr, b_ptr, loop_exit = "%entry", "%A", "%B", "%sums"
    out += ["loop:", f"  %k = phi i64 [0, {start}], [%k.next, %loop]"]
    for r in range(mr):
        for v in range(nv):
            first = f"%e{r}.{v}" if taps else "zeroinitializer"
            out.append(f"  %c{r}.{v} = phi {vec} [{first}, {start}], [%f{r}.{v}, %loop]")
    out.append("  %brow = mul i64 %k, %ldb")
    for v in range(nv):
        out += [f"  %bo{v} = add i64 %brow, {v * width}", f"  %bp{v} = getelementptr float, ptr {b_ptr}, i64 %bo{v}",
                f"  %b{v} = {load(f'%bp{v}', v)}"]
    out.append("  %acol = mul i64 %k, %ask")
    for r in range(mr):
        out += [f"  %ao{r} = add i64 %acol, %ar{r}", f"  %ap{r} = getelementptr float, ptr {a_ptr}, i64 %ao{r}",
                f"  %a{r} = load float, ptr %ap{r}, align 4",
                f"  %a{r}.1 = insertelement {vec} poison, float %a{r}, i32 0",
                f"  %a{r}.v = shufflevector {vec} %a{r}.1, {vec} poison, <{width} x i32> zeroinitializer"]
        for v in range(nv):
            out.append(f"  %f{r}.{v} = call {vec} @llvm.fma.v{width}f32({vec} %a{r}.v, {vec} %b{v}, {vec} %c{r}.{v})")
    out += ["  %k.next = add i64 %k, 1", "  %done = icmp sge i64 %k.next, %K",
            f"  br i1 %done, label {loop_exit}, label %loop"]
    if taps:
        out += ["tap.end:", "  %t.next = add i64 %t, 1", "  %tdone = icmp sge i64 %t.next, %T",
                "  br i1 %tdone, label %sums, label %tap"]
    out += ["zero:", "  br label %sums", "sums:"]
    last = "%tap.end" if taps else "%loop"
    for r in range(mr):  # the sums of the loop, or zeros for K = 0
        for v in range(nv):
            out.append(f"  %s{r}.{v} = phi {vec} [zeroinitializer, %zero], [%f{r}.{v}, {last}]")
    # acc 0: C = sums (set); 1: C += sums (add); 2: C = bias + sums (bias: a row vector, added as C += sums adds it
    # to a C prefilled with it, so the two give the same bits)
    out.append("  switch i64 %acc, label %set0 [i64 1, label %add0 i64 2, label %bias.load]")
    out.append("bias.load:")
    for v in range(nv):
        out += [f"  %bp.{v} = getelementptr float, ptr %bias, i64 {v * width}",
                f"  %bv{v} = {load(f'%bp.{v}', v)}"]
    out.append("  br label %bias0")
    for chain in ("add", "set", "bias"):  # store rows while r < mvalid
        for r in range(mr):
            out += [f"{chain}{r}:", f"  %{chain}.live{r} = icmp slt i64 {r}, %mvalid",
                    f"  br i1 %{chain}.live{r}, label %{chain}.store{r}, label %exit", f"{chain}.store{r}:",
                    f"  %{chain}.co{r} = mul i64 %ldc, {r}"]
            for v in range(nv):
                at = f"{chain}.{r}.{v}"
                out += [f"  %cx{at} = add i64 %{chain}.co{r}, {v * width}",
                        f"  %cp{at} = getelementptr float, ptr %C, i64 %cx{at}"]
                value = f"%s{r}.{v}"
                if chain == "add":
                    out += [f"  %old{at} = {load(f'%cp{at}', v)}", f"  %sum{at} = fadd {vec} %old{at}, %s{r}.{v}"]
                    value = f"%sum{at}"
                elif chain == "bias":
                    out.append(f"  %sum{at} = fadd {vec} %bv{v}, %s{r}.{v}")
                    value = f"%sum{at}"
                out.append(f"  {store(value, f'%cp{at}', v)}")
            out.append(f"  br label %{chain}{r + 1}" if r + 1 < mr else "  br label %exit")
    out += ["exit:", "  ret void", "}"]
    return out



def transpose_ir(width: int = TRANSPOSE) -> str:
    """LLVM IR text of `tr`, which copies a width x width block transposed: dst[c * ldd + r] = src[r * lds + c].
    Four rounds of two-source shuffles swap the off-diagonal blocks of 8, 4, 2 and 1 (a transpose is the
    transpose of its quadrants with the two off-diagonal ones swapped), where a scalar copy wrote down a
    column one value at a time."""
    vec = f"<{width} x float>"
    out = ["define void @tr(ptr noalias %src, i64 %lds, ptr noalias %dst, i64 %ldd) #0 {", "entry:"]
    rows = []
    for r in range(width):
        out += [f"  %so{r} = mul i64 %lds, {r}", f"  %sp{r} = getelementptr float, ptr %src, i64 %so{r}",
                f"  %v0.{r} = load {vec}, ptr %sp{r}, align 4"]
        rows.append(f"%v0.{r}")
    size, stage = width // 2, 0
    while size:
        stage += 1
        new = list(rows)
        for r in range(width):
            if r & size:
                continue
            low = ", ".join(f"i32 {lane if not lane & size else width + lane - size}" for lane in range(width))
            high = ", ".join(f"i32 {lane + size if not lane & size else width + lane}" for lane in range(width))
            out += [f"  %v{stage}.{r} = shufflevector {vec} {rows[r]}, {vec} {rows[r + size]}, <{width} x i32> <{low}>",
                    f"  %v{stage}.{r + size} = shufflevector {vec} {rows[r]}, {vec} {rows[r + size]}, "
                    f"<{width} x i32> <{high}>"]
            new[r], new[r + size] = f"%v{stage}.{r}", f"%v{stage}.{r + size}"
        rows, size = new, size // 2
    for r in range(width):
        out += [f"  %do{r} = mul i64 %ldd, {r}", f"  %dp{r} = getelementptr float, ptr %dst, i64 %do{r}",
                f"  store {vec} {rows[r]}, ptr %dp{r}, align 4"]
    out += ["  ret void", "}"]
    return "\n".join(out) + "\n"


def deinterleave_ir(width: int = TRANSPOSE) -> str:
    """LLVM IR text of `deint`, which splits `count` pairs into their first and second values: even[m] = src[2m],
    odd[m] = src[2m + 1] (a stride-2 convolution's phase planes). Two vector loads and two shuffles per `width`
    pairs, where a compiled loop of strided loads ran one value at a time."""
    vec, wide = f"<{width} x float>", f"<{2 * width} x float>"
    evens = ", ".join(f"i32 {2 * i}" for i in range(width))
    odds = ", ".join(f"i32 {2 * i + 1}" for i in range(width))
    return "\n".join([
        "define void @deint(ptr noalias %src, i64 %count, ptr noalias %even, ptr noalias %odd) #0 {",
        "entry:",
        f"  %blocks = udiv i64 %count, {width}",
        "  br label %vhead",
        "vhead:",
        "  %b = phi i64 [0, %entry], [%b.next, %vbody]",
        "  %vdone = icmp uge i64 %b, %blocks",
        "  br i1 %vdone, label %shead, label %vbody",
        "vbody:",
        f"  %m0 = mul i64 %b, {width}",
        "  %s0 = shl i64 %m0, 1",
        "  %sp = getelementptr float, ptr %src, i64 %s0",
        f"  %pairs = load {wide}, ptr %sp, align 4",
        f"  %ev = shufflevector {wide} %pairs, {wide} poison, <{width} x i32> <{evens}>",
        f"  %ov = shufflevector {wide} %pairs, {wide} poison, <{width} x i32> <{odds}>",
        "  %ep = getelementptr float, ptr %even, i64 %m0",
        "  %op = getelementptr float, ptr %odd, i64 %m0",
        f"  store {vec} %ev, ptr %ep, align 4",
        f"  store {vec} %ov, ptr %op, align 4",
        "  %b.next = add i64 %b, 1",
        "  br label %vhead",
        "shead:",
        f"  %tail0 = mul i64 %blocks, {width}",
        "  br label %scheck",
        "scheck:",
        "  %m = phi i64 [%tail0, %shead], [%m.next, %sbody]",
        "  %sdone = icmp uge i64 %m, %count",
        "  br i1 %sdone, label %exit, label %sbody",
        "sbody:",
        "  %i0 = shl i64 %m, 1",
        "  %i1 = add i64 %i0, 1",
        "  %p0 = getelementptr float, ptr %src, i64 %i0",
        "  %p1 = getelementptr float, ptr %src, i64 %i1",
        "  %v0 = load float, ptr %p0, align 4",
        "  %v1 = load float, ptr %p1, align 4",
        "  %q0 = getelementptr float, ptr %even, i64 %m",
        "  %q1 = getelementptr float, ptr %odd, i64 %m",
        "  store float %v0, ptr %q0, align 4",
        "  store float %v1, ptr %q1, align 4",
        "  %m.next = add i64 %m, 1",
        "  br label %scheck",
        "exit:",
        "  ret void",
        "}"]) + "\n"


def microkernel_address() -> int:
    """The compiled micro-kernel's address for this process, or 0 where the CPU has neither block (BLOCK is None)
    or llvmlite is missing (the `jit` extra)."""
    if "address" not in _state:
        with _lock:
            if "address" not in _state:
                compiled = compile_block(BLOCK) if BLOCK is not None else None
                _state.update(compiled or {})
                _state["address"] = compiled["ukr"] if compiled else 0
    return _state["address"]


def runs_here(block: Block) -> bool:
    """Whether this CPU runs `block`'s instructions, as /proc/cpuinfo and LLVM both see them (False without
    llvmlite)."""
    if block.isa not in _cpu_flags() or "fma" not in _cpu_flags():
        return False
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return False
    features = llvm.get_host_cpu_features()
    return bool(features.get(block.isa)) and bool(features.get("fma"))


def compile_block(block: Block) -> dict | None:
    """`block`'s micro-kernels compiled for this CPU, by name: ukr, ukr_wide, ukr_taps, ukr_wide_taps, and the
    transposing copy `tr` and pair split `deint`, with the `engine` that holds their code; None where the CPU
    does not run it (runs_here)."""
    if not runs_here(block):
        return None
    import llvmlite.binding as llvm

    for init in ("initialize_native_target", "initialize_native_asmprinter"):
        getattr(llvm, init)()
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=llvm.get_host_cpu_features().flatten(), opt=3)
    sizes = {"mr": block.mr, "width": block.width}
    kernels = [microkernel_ir(nr=block.nr, name="ukr", **sizes),
               microkernel_ir(nr=block.wide_nr, name="ukr_wide", **sizes),
               microkernel_ir(nr=block.nr, name="ukr_taps", taps=True, **sizes),
               microkernel_ir(nr=block.wide_nr, name="ukr_wide_taps", taps=True, **sizes)]
    kernels[1:] = ["\n".join(line for line in text.splitlines() if not line.startswith(("declare", "attributes")))
                   for text in kernels[1:]]  # the declarations and attributes once
    module = llvm.parse_assembly("\n".join(kernels) + "\n" + transpose_ir() + deinterleave_ir())
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    names = ("ukr", "ukr_wide", "ukr_taps", "ukr_wide_taps", "tr", "deint")
    return {"engine": engine, **{name: engine.get_function_address(name) for name in names}}  # the engine holds
    # the code: it lives as long as the dict


def transpose_address() -> int:
    """The compiled 16 x 16 transposing copy's address (see transpose_ir), or 0 where microkernel_address is."""
    return _state["tr"] if microkernel_address() else 0


def wide_microkernel_address() -> int:
    """The compiled MR x WIDE_NR micro-kernel's address (same arguments as the MR x NR one), or 0 where
    microkernel_address is."""
    return _state["ukr_wide"] if microkernel_address() else 0


def taps_microkernel_address(nr: int) -> int:
    """The compiled MR x nr (NR or WIDE_NR) micro-kernel with the taps loop (microkernel_ir's `taps`), or 0 where
    microkernel_address is."""
    return _state["ukr_wide_taps" if nr == WIDE_NR else "ukr_taps"] if microkernel_address() else 0


def deinterleave_address() -> int:
    """The compiled pair split's address (see deinterleave_ir), or 0 where microkernel_address is."""
    return _state["deint"] if microkernel_address() else 0
