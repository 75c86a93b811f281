"""The ONNX form of Ember's `getitem`: one Slice for the slices and integers, a Gather for one integer
index tensor, and a Reshape to the result's shape (dropping integer-indexed dims, adding None dims)."""

from __future__ import annotations

import numpy as np

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _consumes(item, arrays) -> int:
    if item is None or isinstance(item, bool):
        return 0
    if type(item) is tuple:  # ("t", k): an index tensor
        a = arrays[item[1]]
        return len(a.shape) if a.dtype == np.bool_ else 1
    return 1


def getitem(ctx, node):
    """ONNX nodes computing node's x[index]; returns the output name."""
    x, *arrays = node.inputs
    index = node.attrs["index"]
    index = index if isinstance(index, tuple) else (index,)
    nd = len(x.shape)
    if Ellipsis in index:
        k = index.index(Ellipsis)
        used = sum(_consumes(i, arrays) for i in index if i is not Ellipsis)
        index = index[:k] + (slice(None),) * (nd - used) + index[k + 1:]
    starts, ends, axes, steps = [], [], [], []
    tensors = []  # (dim, array value)
    d = 0
    for item in index:
        if item is None:
            continue
        if isinstance(item, bool) or (type(item) is tuple and arrays[item[1]].dtype == np.bool_):
            raise NotImplementedError(f"ember.onnx.export: op 'getitem' (node %{node.id}) with a boolean mask has "
                                      "a data-dependent shape and no ONNX mapping; use where() instead")
        if type(item) is tuple:
            tensors.append((d, arrays[item[1]]))
        elif isinstance(item, slice):
            step = 1 if item.step is None else item.step
            if not (item.start in (None, 0) and item.stop is None and step == 1) or (step < 0):
                start = item.start if item.start is not None else (0 if step > 0 else -1)
                stop = item.stop if item.stop is not None else (_INT64_MAX if step > 0 else _INT64_MIN)
                starts.append(start)
                ends.append(stop)
                axes.append(d)
                steps.append(step)
        else:
            starts.append(item)
            ends.append(item + 1 if item != -1 else _INT64_MAX)
            axes.append(d)
            steps.append(1)
        d += 1
    y = ctx.input(x)
    if axes:
        y = ctx.add("Slice", [y, ctx.ints(starts, "starts"), ctx.ints(ends, "ends"), ctx.ints(axes, "axes"),
                              ctx.ints(steps, "steps")])
    if len(tensors) > 1:
        raise NotImplementedError(f"ember.onnx.export: op 'getitem' (node %{node.id}) with {len(tensors)} index "
                                  "tensors has no ONNX mapping; index one dimension at a time")
    advanced = [k for k, item in enumerate(index) if type(item) is tuple or (isinstance(item, int) and
                                                                         not isinstance(item, bool))]
    if tensors and advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise NotImplementedError(f"ember.onnx.export: op 'getitem' (node %{node.id}) mixes an index tensor with "
                                  "integers at non-adjacent positions, which moves dimensions; index in two steps")
    if tensors:
        dim, arr = tensors[0]
        y = ctx.add("Gather", [y, ctx.input(arr, np.int64)], axis=dim)
    out = node.outputs[0]
    reshaped = any(item is None or (isinstance(item, int) and not isinstance(item, bool)) for item in index)
    if tensors or reshaped or not axes:
        y = ctx.add("Reshape", [y, ctx.ints(out.shape)])
    return y
