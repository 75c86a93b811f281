"""The standard DDP communication hooks, with PyTorch's names: plain allreduce, and fp16/bf16 compression.

`ddp.register_comm_hook(process_group, fp16_compress_hook)` halves the bytes each gradient allreduce
sends: the bucket is cast to float16 and divided by the world size, summed over the ranks in float16
(each addition rounded, as the wire type does), and cast back into the bucket. bfloat16 keeps
float32's range with 8 bits of mantissa. The `*_wrapper`s apply the cast around any other hook.
The state is the process group (None: the default group).
"""

from __future__ import annotations

from ember.distributed.collectives import all_reduce
from ember.distributed.group import resolve

__all__ = ["allreduce_hook", "bf16_compress_hook", "bf16_compress_wrapper", "fp16_compress_hook",
           "fp16_compress_wrapper"]


def allreduce_hook(process_group, bucket):
    """The bucket averaged over the ranks by one allreduce: what DDP does without a hook."""
    group = resolve(process_group, "allreduce_hook")
    buffer = bucket.buffer()
    buffer.div_(group.size())
    return all_reduce(buffer, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _compress_hook(dtype, process_group, bucket, what: str):
    group = resolve(process_group, what)
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(group.size())

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer

    return all_reduce(compressed, group=group, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Allreduce the bucket as float16 (divided by the world size first), cast back to its dtype."""
    from ember.dtypes import float16

    return _compress_hook(float16, process_group, bucket, "fp16_compress_hook")


def bf16_compress_hook(process_group, bucket):
    """Allreduce the bucket as bfloat16 (divided by the world size first), cast back to its dtype."""
    from ember.dtypes import bfloat16

    return _compress_hook(bfloat16, process_group, bucket, "bf16_compress_hook")


def _compress_wrapper(dtype, hook):
    def wrapped(hook_state, bucket):
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(fut):
            buffer.copy_(fut.value())
            return buffer

        return fut.then(decompress)

    wrapped.__name__ = f"{dtype.name}_compress_wrapper({getattr(hook, '__name__', 'hook')})"
    return wrapped


def fp16_compress_wrapper(hook):
    """`hook` run on a float16 copy of the bucket, its result cast back (fp16_compress_hook = this of allreduce_hook)."""
    from ember.dtypes import float16

    return _compress_wrapper(float16, hook)


def bf16_compress_wrapper(hook):
    """`hook` run on a bfloat16 copy of the bucket, its result cast back."""
    from ember.dtypes import bfloat16

    return _compress_wrapper(bfloat16, hook)
