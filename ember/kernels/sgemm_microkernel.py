"""A float32 GEMM micro-kernel for AVX-512, the 16 x 16 transposing copy that packs transposed operands for it
and a pair split for strided convolutions' inputs, written in LLVM IR and compiled for this CPU with llvmlite.

The micro-kernel keeps an MR x NR block of C (8 rows x two 16-wide vectors: 16 of the 32 zmm registers) in
registers over the whole K loop: per k it loads NR values of a B row, broadcasts MR values of A and issues
16 FMAs, the register-blocked inner loop of every BLAS (and of oneDNN's and XNNPACK's generated kernels).
Masked loads and stores let one kernel serve partial column blocks, and `mvalid` partial
row blocks. LLVM emits the AVX-512 code itself, so the kernel follows the host (`znver5`, `skylake-avx512`...)
whatever OpenBLAS was told: NumPy's OpenBLAS picks its kernels at load time, and OPENBLAS_CORETYPE=Haswell
(set on some AVX-512 machines) holds it to AVX2 at half the width.

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

MR, NR = 8, 32  # rows x columns of the register block (8 rows: channel counts and batch halves divide evenly;
# 12 rows did as well on large products and padded 16-row ones to 24)
_WIDTH = 16  # float32 lanes of a zmm register
# A wider block, 8 x 48 in 24 registers (three B vectors, the same eight broadcasts per k), for the direct
# convolution, whose weight gradients have 3 x C columns (48 for 16 channels, which the 32-wide block runs in two
# calls, the second half-masked)
WIDE_NR = 48

_lock = threading.Lock()
_state: dict = {}


def microkernel_ir(mr: int = MR, nr: int = NR, width: int = _WIDTH, name: str = "ukr", taps: bool = False) -> str:
    """LLVM IR text of the micro-kernel `name` for an mr x nr block (nr a multiple of `width`). With `taps` it
    takes three more arguments, T and two arrays of T offsets (in values), and sums T products of K, the t-th
    over A + aoff[t] and B + boff[t], in the same registers: a direct convolution's taps in one call, where a call
    per tap loaded and stored the block of C once per tap."""
    nv, vec = nr // width, f"<{width} x float>"
    mask = f"<{width} x i1>"
    extra = ", i64 %T, ptr noalias %aoff, ptr noalias %boff" if taps else ""
    out = [f"declare {vec} @llvm.fma.v{width}f32({vec}, {vec}, {vec})",
           f"declare {vec} @llvm.masked.load.v{width}f32.p0(ptr, i32, {mask}, {vec})",
           f"declare void @llvm.masked.store.v{width}f32.p0({vec}, ptr, i32, {mask})",
           f"define void @{name}(i64 %K, ptr noalias %A, i64 %ask, i64 %asr, ptr noalias %B, i64 %ldb, ptr noalias %C, "
           "i64 %ldc, "
           f"i64 %nvalid, i64 %mvalid, i64 %acc, ptr noalias %bias{extra}) #0 {{",
           "entry:",
           f"  %nv.1 = insertelement <{width} x i64> poison, i64 %nvalid, i32 0",
           f"  %nv = shufflevector <{width} x i64> %nv.1, <{width} x i64> poison, <{width} x i32> zeroinitializer"]
    for v in range(nv):  # lane j of vector v is live when v * width + j < nvalid
        lanes = ", ".join(f"i64 {v * width + j}" for j in range(width))
        out.append(f"  %m{v} = icmp slt <{width} x i64> <{lanes}>, %nv")
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
                f"  %b{v} = call {vec} @llvm.masked.load.v{width}f32.p0(ptr %bp{v}, i32 4, {mask} %m{v}, "
                f"{vec} zeroinitializer)"]
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
                f"  %bv{v} = call {vec} @llvm.masked.load.v{width}f32.p0(ptr %bp.{v}, i32 4, {mask} %m{v}, "
                f"{vec} zeroinitializer)"]
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
                    out += [f"  %old{at} = call {vec} @llvm.masked.load.v{width}f32.p0(ptr %cp{at}, i32 4, {mask} %m{v}, "
                            f"{vec} zeroinitializer)", f"  %sum{at} = fadd {vec} %old{at}, %s{r}.{v}"]
                    value = f"%sum{at}"
                elif chain == "bias":
                    out.append(f"  %sum{at} = fadd {vec} %bv{v}, %s{r}.{v}")
                    value = f"%sum{at}"
                out.append(f"  call void @llvm.masked.store.v{width}f32.p0({vec} {value}, ptr %cp{at}, i32 4, {mask} %m{v})")
            out.append(f"  br label %{chain}{r + 1}" if r + 1 < mr else "  br label %exit")
    out += ["exit:", "  ret void", "}", "attributes #0 = { nounwind }"]
    return "\n".join(out) + "\n"



def transpose_ir(width: int = _WIDTH) -> str:
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


def deinterleave_ir(width: int = _WIDTH) -> str:
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


def _host_has_avx512() -> bool:
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return bool(features.get("avx512f")) and bool(features.get("fma"))


def microkernel_address() -> int:
    """The compiled micro-kernel's address for this process, or 0 where the CPU lacks AVX-512 or llvmlite is
    missing (the `jit` extra)."""
    if "address" not in _state:
        with _lock:
            if "address" not in _state:
                _state["address"] = _compile()
    return _state["address"]


def _compile() -> int:
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return 0
    if not _host_has_avx512():
        return 0
    for init in ("initialize_native_target", "initialize_native_asmprinter"):
        getattr(llvm, init)()
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=llvm.get_host_cpu_features().flatten(), opt=3)
    others = [microkernel_ir(nr=WIDE_NR, name="ukr_wide"), microkernel_ir(name="ukr_taps", taps=True),
              microkernel_ir(nr=WIDE_NR, name="ukr_wide_taps", taps=True)]
    others = ["\n".join(line for line in text.splitlines() if not line.startswith(("declare", "attributes")))
              for text in others]  # the declarations and attributes once
    module = llvm.parse_assembly(microkernel_ir() + "\n".join(others) + "\n" + transpose_ir() + deinterleave_ir())
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    _state["engine"] = engine  # the code lives as long as its engine
    _state["transpose"] = engine.get_function_address("tr")
    _state["deinterleave"] = engine.get_function_address("deint")
    _state["wide"] = engine.get_function_address("ukr_wide")
    _state["taps"] = engine.get_function_address("ukr_taps"), engine.get_function_address("ukr_wide_taps")
    return engine.get_function_address("ukr")


def transpose_address() -> int:
    """The compiled 16 x 16 transposing copy's address (see transpose_ir), or 0 where microkernel_address is."""
    return _state["transpose"] if microkernel_address() else 0


def wide_microkernel_address() -> int:
    """The compiled MR x WIDE_NR micro-kernel's address (same arguments as the MR x NR one), or 0 where
    microkernel_address is."""
    return _state["wide"] if microkernel_address() else 0


def taps_microkernel_address(nr: int) -> int:
    """The compiled MR x nr (NR or WIDE_NR) micro-kernel with the taps loop (microkernel_ir's `taps`), or 0 where
    microkernel_address is."""
    return _state["taps"][nr == WIDE_NR] if microkernel_address() else 0


def deinterleave_address() -> int:
    """The compiled pair split's address (see deinterleave_ir), or 0 where microkernel_address is."""
    return _state["deinterleave"] if microkernel_address() else 0
