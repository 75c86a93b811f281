"""Numba intrinsics for threads that hand work over without the GIL (thread_pool.py): atomic loads, stores and
compare-and-swaps of int64 counters, `sched_yield`, the futex system call, calls through a C function's address
and through a Numba-compiled function's address, and the words of a chunk's row and the array views built from them.
Imported only by the generated kernel sources, so importing Ember needs no Numba."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils, errors
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

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


@intrinsic
def call_split(typingctx, fn, ctl, task, blocks, block_bytes, parts, polls, futex_nr):
    """The pool's compiled `split` at address fn (Numba's calling convention: int64(int64[::1], int64 x 6)) called
    with the other arguments: its result. A launcher calls it so, not by name, which would link split's code into
    every launcher, where LLVM would optimise and compile it again."""
    words = types.Array(types.int64, 1, "C")
    argtys = (words,) + (types.int64,) * 6

    def codegen(context, builder, sig, args):
        call_conv = context.call_conv
        target = builder.inttoptr(args[0], call_conv.get_function_type(types.int64, argtys).as_pointer())
        status, result = call_conv.call_function(builder, target, types.int64, argtys, list(args[1:]))
        with builder.if_then(status.is_error, likely=False):
            call_conv.return_status_propagate(builder, status)
        return result

    return types.int64(types.int64, *argtys), codegen


# A chunk's row of int64 words, read and written at its address: typing these costs next to nothing, where carray,
# as_strided and .ctypes are overloads that Numba types (and compiles helpers for) in every process, about half of
# an entry point's compile.
def _word_slot(builder, row, index, pointee):
    return builder.gep(builder.inttoptr(row, pointee.as_pointer()), [index])


@intrinsic
def word(typingctx, row, index):
    """The int64 word `index` of the row at address `row`."""
    def codegen(context, builder, sig, args):
        return builder.load(_word_slot(builder, args[0], args[1], _I64))

    return types.int64(types.int64, types.intp), codegen


@intrinsic
def real(typingctx, row, index):
    """The word `index` of the row at address `row`, read as a float64."""
    def codegen(context, builder, sig, args):
        return builder.load(_word_slot(builder, args[0], args[1], ir.DoubleType()))

    return types.float64(types.int64, types.intp), codegen


@intrinsic
def put(typingctx, row, index, value):
    """Word `index` of the row at address `row` = value (an integer, or a float64's bits)."""
    if isinstance(value, types.Float):
        value_type, pointee = types.float64, ir.DoubleType()
    elif isinstance(value, (types.Integer, types.Boolean)):
        value_type, pointee = types.int64, _I64
    else:
        return None

    def codegen(context, builder, sig, args):
        stored = context.cast(builder, args[2], sig.args[2], value_type)
        builder.store(stored, _word_slot(builder, args[0], args[1], pointee))
        return context.get_dummy_value()

    return types.void(types.int64, types.intp, value), codegen


@intrinsic
def data_of(typingctx, array):
    """The address of `array`'s first element, as an int64."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, _I64)

    return types.int64(array), codegen


def _array_type(dtype, shape, strided: bool):
    if not isinstance(dtype, (types.NumberClass, types.DType)) or not isinstance(shape, types.BaseTuple):
        return None
    return types.Array(dtype.dtype, len(shape), "A" if strided else "C")


def _item_size(context, array_type):
    """The bytes of one of `array_type`'s values, as an intp constant."""
    return context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(array_type.dtype)))


def _view(context, builder, array_type, data, shape, strides):
    """An array of `array_type` over memory it does not own, at address `data` (int64)."""
    view = context.make_array(array_type)(context, builder)
    populate_array(view, data=builder.inttoptr(data, view.data.type), shape=shape, strides=strides,
                   itemsize=_item_size(context, array_type), meminfo=None)
    return view._getvalue()


@intrinsic
def array_at(typingctx, data, shape, dtype):
    """The C-contiguous array of `shape` (a tuple) and `dtype` at address `data`, as carray makes it."""
    array_type = _array_type(dtype, shape, strided=False)
    if array_type is None:
        return None

    def codegen(context, builder, sig, args):
        dims = cgutils.unpack_tuple(builder, args[1], array_type.ndim)
        step = _item_size(context, array_type)
        strides = []
        for dim in reversed(dims):
            strides.insert(0, step)
            step = builder.mul(step, dim)
        return _view(context, builder, array_type, args[0], dims, strides)

    return array_type(types.int64, shape, dtype), codegen


@intrinsic
def strided_at(typingctx, data, shape, strides, dtype):
    """The array of `shape` and `strides` (bytes; tuples) and `dtype` at address `data`, of any layout ("A")."""
    array_type = _array_type(dtype, shape, strided=True)
    if array_type is None:
        return None

    def codegen(context, builder, sig, args):
        ndim = array_type.ndim
        dims = cgutils.unpack_tuple(builder, args[1], ndim)
        return _view(context, builder, array_type, args[0], dims, cgutils.unpack_tuple(builder, args[2], ndim))

    return array_type(types.int64, shape, strides, dtype), codegen
