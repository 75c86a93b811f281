"""Numba intrinsics for the compiled GEMM driver and the direct convolution: a float32 pointer from an address,
and calls of the micro-kernel, the transposing copy and the pair split through their addresses (passed as
arguments, so the compiled code holds no address and Numba can keep it on disk)."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_I64 = ir.IntType(64)


@intrinsic
def float32_at(typingctx, address):
    """A float32 pointer (indexable) to `address`."""
    sig = types.CPointer(types.float32)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


def _call_at(kinds: str):
    """(signature, codegen) of an intrinsic calling the void function at the address in its first argument with
    the others, all int64: those whose letter in `kinds` is 'p' passed as pointers, 'i' as integers."""
    sig = types.void(*([types.int64] * (len(kinds) + 1)))

    def codegen(context, builder, signature, args):
        ptr = ir.PointerType()
        fnty = ir.FunctionType(ir.VoidType(), [ptr if k == "p" else _I64 for k in kinds])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(fn, [builder.inttoptr(v, ptr) if k == "p" else v for k, v in zip(kinds, args[1:])])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def call_microkernel(typingctx, ukr, k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias):
    """ukr(K, A, ask, asr, B, ldb, C, ldc, nvalid, mvalid, acc, bias) for the micro-kernel at address `ukr`;
    A, B, C and bias are addresses, all arguments int64."""
    return _call_at("ipiipipiiiip")


@intrinsic
def call_microkernel_taps(typingctx, ukr, k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias, taps, aoff, boff):
    """call_microkernel's call plus the taps loop's count and two offset arrays (addresses of int64 values) for a
    micro-kernel compiled with microkernel_ir's `taps`."""
    return _call_at("ipiipipiiiipipp")


@intrinsic
def call_transpose(typingctx, tr, src, lds, dst, ldd):
    """tr(src, lds, dst, ldd), the 16 x 16 transposing copy at address `tr`; src and dst are addresses."""
    return _call_at("pipi")


@intrinsic
def call_deinterleave(typingctx, fn, src, count, even, odd):
    """fn(src, count, even, odd), the pair split at address `fn`; src, even and odd are addresses."""
    return _call_at("pipp")


@intrinsic
def call_driver(typingctx, drv, ukr, tr, a, sab, sam, sak, b, sbb, sbk, sbn, c, scb, scm, k_len, accumulate, bias, b_lo,
                b_hi, r_lo, r_hi, j_lo, j_hi):
    """The GEMM driver's C entry point at address `drv` (sgemm.driver_address) with sgemm_entry's arguments,
    all int64: a kernel calling it so compiles without the driver's code."""
    return _call_at("i" * 22)
