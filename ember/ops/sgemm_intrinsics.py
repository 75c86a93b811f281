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


@intrinsic
def call_microkernel(typingctx, ukr, k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias):
    """ukr(K, A, ask, asr, B, ldb, C, ldc, nvalid, mvalid, acc, bias) for the micro-kernel at address `ukr`;
    A, B, C and bias are addresses, all arguments int64."""
    sig = types.void(*([types.int64] * 13))

    def codegen(context, builder, signature, args):
        ptr = ir.PointerType()
        fnty = ir.FunctionType(ir.VoidType(), [_I64, ptr, _I64, _I64, ptr, _I64, ptr, _I64, _I64, _I64, _I64, ptr])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias = args[1:]
        builder.call(fn, [k, builder.inttoptr(a, ptr), ask, asr, builder.inttoptr(b, ptr), ldb, builder.inttoptr(c, ptr),
                          ldc, nvalid, mvalid, acc, builder.inttoptr(bias, ptr)])
        return context.get_dummy_value()

    return sig, codegen



@intrinsic
def call_microkernel_taps(typingctx, ukr, k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias, taps, aoff, boff):
    """call_microkernel's call plus the taps loop's count and two offset arrays (addresses of int64 values) for a
    micro-kernel compiled with microkernel_ir's `taps`."""
    sig = types.void(*([types.int64] * 16))

    def codegen(context, builder, signature, args):
        ptr = ir.PointerType()
        fnty = ir.FunctionType(ir.VoidType(), [_I64, ptr, _I64, _I64, ptr, _I64, ptr, _I64, _I64, _I64, _I64, ptr, _I64,
                                               ptr, ptr])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        k, a, ask, asr, b, ldb, c, ldc, nvalid, mvalid, acc, bias, taps, aoff, boff = args[1:]
        as_ptr = [builder.inttoptr(v, ptr) for v in (a, b, c, bias, aoff, boff)]
        builder.call(fn, [k, as_ptr[0], ask, asr, as_ptr[1], ldb, as_ptr[2], ldc, nvalid, mvalid, acc, as_ptr[3], taps,
                          as_ptr[4], as_ptr[5]])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def call_transpose(typingctx, tr, src, lds, dst, ldd):
    """tr(src, lds, dst, ldd), the 16 x 16 transposing copy at address `tr`; src and dst are addresses."""
    sig = types.void(*([types.int64] * 5))

    def codegen(context, builder, signature, args):
        ptr = ir.PointerType()
        fnty = ir.FunctionType(ir.VoidType(), [ptr, _I64, ptr, _I64])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        src, lds, dst, ldd = args[1:]
        builder.call(fn, [builder.inttoptr(src, ptr), lds, builder.inttoptr(dst, ptr), ldd])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def call_deinterleave(typingctx, fn, src, count, even, odd):
    """fn(src, count, even, odd), the pair split at address `fn`; src, even and odd are addresses."""
    sig = types.void(*([types.int64] * 5))

    def codegen(context, builder, signature, args):
        ptr = ir.PointerType()
        fnty = ir.FunctionType(ir.VoidType(), [ptr, _I64, ptr, ptr])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        src, count, even, odd = args[1:]
        builder.call(f, [builder.inttoptr(src, ptr), count, builder.inttoptr(even, ptr), builder.inttoptr(odd, ptr)])
        return context.get_dummy_value()

    return sig, codegen
