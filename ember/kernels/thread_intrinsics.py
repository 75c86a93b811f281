"""Numba intrinsics for threads that hand work over without the GIL (thread_pool.py): atomic loads, stores and
compare-and-swaps of int64 counters, `sched_yield`, the futex system call, and calls through a C function's address
and through a Numba-compiled function's address.
Imported only by the generated kernel sources, so importing Ember needs no Numba."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils, errors
from numba.extending import intrinsic

_I64 = ir.IntType(64)


def _slot(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(builder.bitcast(data, _I64.as_pointer()), [index])


@intrinsic
def load(typingctx, counters, index):
    """counters[index] (int64), an atomic sequentially consistent load: never hoisted out of a loop, and the writes
    made before the counter was raised are visible after it."""
    def codegen(context, builder, sig, args):
        return builder.load_atomic(_slot(context, builder, sig.args[0], *args), "seq_cst", 8)

    return types.int64(counters, types.intp), codegen


@intrinsic
def store(typingctx, counters, index, value):
    """counters[index] = value, an atomic sequentially consistent store."""
    def codegen(context, builder, sig, args):
        builder.store_atomic(args[2], _slot(context, builder, sig.args[0], args[0], args[1]), "seq_cst", 8)
        return context.get_dummy_value()

    return types.void(counters, types.intp, types.int64), codegen


@intrinsic
def swap_if(typingctx, counters, index, expected, value):
    """counters[index] = value if it holds `expected` (one atomic compare-and-swap, sequentially consistent): whether
    it did."""
    def codegen(context, builder, sig, args):
        slot = _slot(context, builder, sig.args[0], args[0], args[1])
        return builder.extract_value(builder.cmpxchg(slot, args[2], args[3], "seq_cst", "seq_cst"), 1)

    return types.boolean(counters, types.intp, types.int64, types.int64), codegen


@intrinsic
def sched_yield(typingctx):
    """The OS call that lets another runnable thread have this core."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def futex(typingctx, number, counters, index, op, value):
    """syscall(number, &counters[index] (its low 32 bits), op, value, NULL): wait while those bits equal value, or
    wake the threads waiting on them."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I64, [_I64], var_arg=True), "syscall")
        address = builder.ptrtoint(_slot(context, builder, sig.args[1], args[1], args[2]), _I64)
        builder.call(fn, [args[0], address, args[3], args[4], ir.Constant(_I64, 0)])
        return context.get_dummy_value()

    return types.void(types.int64, counters, types.intp, types.int64, types.int64), codegen


@intrinsic
def call_task(typingctx, fn, arg):
    """The C function at address fn, int64(int64), called with arg: its result."""
    def codegen(context, builder, sig, args):
        target = builder.inttoptr(args[0], ir.FunctionType(_I64, [_I64]).as_pointer())
        return builder.call(target, [args[1]])

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def address(typingctx, value):
    """The int64 `value` as a void pointer (for carray)."""
    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return types.voidptr(types.int64), codegen


@intrinsic
def call_compiled(typingctx, fn, arguments, expected):
    """The Numba-compiled function at address fn (Numba's own calling convention, returning None) called with the
    tuple `arguments`, whose types must read `expected` (a string literal): a mismatch fails here, at compile time,
    not as a call with the wrong layout. An exception the callee raises propagates to the caller."""
    if not isinstance(arguments, types.BaseTuple) or not isinstance(expected, types.StringLiteral):
        return None
    argtys = tuple(arguments.types)
    if str(argtys) != expected.literal_value:
        raise errors.TypingError(f"call_compiled: arguments {argtys} are not the {expected.literal_value} expected")

    def codegen(context, builder, sig, args):
        call_conv = context.call_conv
        target = builder.inttoptr(args[0], call_conv.get_function_type(types.none, argtys).as_pointer())
        values = cgutils.unpack_tuple(builder, args[1], len(argtys))
        status, _ = call_conv.call_function(builder, target, types.none, argtys, values)
        with builder.if_then(status.is_error, likely=False):
            call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.void(types.int64, arguments, expected), codegen
