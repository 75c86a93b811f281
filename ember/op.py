"""The op contract: one definition per primitive, registered by name.

An op carries a shape/dtype rule (`infer`, which is all the meta device and graph building run),
a kernel written against an array module `xp` (NumPy or CuPy), and a gradient rule (`vjp`) written
in Ember ops so it works eagerly, symbolically and to any order. It also declares what it is, so
the layers that treat ops generically (autograd, the memory planner, `out=` execution, fused-code
renderers) read declarations instead of keeping tables of op names.
"""

from __future__ import annotations

OPS: dict = {}


class Op:
    """Base of every primitive. Subclasses set the class attributes and the three rules."""

    name: str = ""
    n_outputs: int = 1
    save_inputs: tuple | slice = ()  # input positions the gradient rule reads (version-checked)
    # When given: {input position: positions its gradient reads}; autograd then saves only what the
    # gradients of the inputs that need one read (`x * 2` saves nothing, `x * w` saves w for x's).
    grad_reads: dict | None = None
    save_outputs: tuple = ()  # output positions the gradient rule reads
    is_view: bool | str = False  # True: output aliases input 0; "maybe": only if the kernel could
    differentiable: bool = True
    elementwise: bool = False  # one output element from the same-position input elements
    inplace_ok: bool = False  # the result may be computed into a dying input's buffer (memory planner)
    fresh_output: bool = False  # results are new memory, never views of an input (memory planner)
    ufunc: str | None = None  # the NumPy ufunc computing this op exactly (out= kernels, fused code)
    ufunc_kinds: str = "biuf"  # dtype kinds (compute dtype) for which `ufunc` equals the kernel
    # The NumPy ufunc that is this op's kernel, exactly, on float32/float64 arrays of one dtype (and a Python float
    # or int beside one): the dispatch fast paths then call it with no kernel call between.
    float_ufunc = None
    # Optional `split(a, b)`: float_ufunc's values for arrays of MIN_ELEMENTS values or more, computed by a kernel
    # that splits the pass over the threads where it takes the operands (NumPy runs a ufunc on one thread)
    split = None
    # Optional `kernel_out(xp, *args, out=..., **attrs)`: the result written into `out` when it can
    # (else a fresh array from `kernel`), bit for bit the kernel's values. Plans and the eager pool use it. A
    # multi-output op's writes its first result into `out` (plans only: the eager pool takes single results).
    kernel_out = None

    def infer(self, *args, **attrs):
        """Shape/dtype rule: specs (objects with .shape and .dtype) in, a spec (or tuple) out."""
        raise NotImplementedError(f"{self.name} has no shape rule")

    def kernel(self, xp, *args, **attrs):
        """Compute the outputs from arrays of the array module `xp`."""
        raise NotImplementedError(f"{self.name} has no kernel")

    def vjp(self, ctx, *grads):
        """Gradients of the inputs from gradients of the outputs, in Ember ops."""
        raise RuntimeError(f"the derivative of {self.name} is not implemented")

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def register(op: Op) -> Op:
    """Add an op instance to the registry (its name must be new); returns it.

    Convention: an op class is named for what it computes (`SoftmaxOp`); its registered instance,
    the op that `apply` runs, is named after the op (`_softmax_op = register(SoftmaxOp())`).
    """
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    OPS[op.name] = op
    return op

