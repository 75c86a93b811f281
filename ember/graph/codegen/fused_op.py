"""`FusedElementwise`: the op a fused region becomes; its kernel is generated code for the region."""

from __future__ import annotations

import numpy as np

from ember.op import Op


class FusedElementwise(Op):
    """Several elementwise ops (and maybe a trailing sum/mean) computed by one generated kernel.

    The `region` attribute holds the program. `infer` runs the member ops' own shape rules, so the
    fused node has exactly the specs of the values it replaces.
    """

    name = "fused_elementwise"
    differentiable = False
    fresh_output = True

    def infer(self, *inputs, region):
        specs = region.infer(list(inputs))
        return specs[0] if len(specs) == 1 else tuple(specs)

    def kernel(self, xp, *arrays, region):
        if xp is np:
            from ember.graph.codegen import run_region

            outs = run_region(region, arrays)
        else:  # no renderer for this backend yet: the member ops' kernels, one by one
            outs = region.evaluate(xp, arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def kernel_out(self, xp, *arrays, out, region):
        """The kernel writing its single output into `out` (a planned buffer) when the layout allows."""
        if xp is np and region.reduce is None and len(region.outputs) == 1 and out.flags.c_contiguous:
            from ember.graph.codegen.renderer import common_shape

            shape = common_shape([np.shape(a) for a in arrays])
            if out.shape == shape and out.dtype == region.output_dtypes[0]:
                from ember.graph.codegen import run_region

                return run_region(region, arrays, [out])[0]
        return self.kernel(xp, *arrays, region=region)

    def kernel_into(self, xp, *arrays, targets, region):
        """The kernel with some results (position -> array; the reduction, position 0 of a region that
        has one, is never among them) written into the given arrays."""
        skip = 1 if region.reduce is not None else 0
        outs = [targets.get(p + skip) for p in range(len(region.outputs))]
        from ember.graph.codegen import run_region

        results = run_region(region, arrays, outs)
        return results[0] if len(results) == 1 else tuple(results)

    def vjp(self, ctx, *grads):
        raise RuntimeError(
            "fused_elementwise has no gradient: fusion runs after autodiff has built the backward graph; "
            "differentiate the unoptimised graph (or the function) instead"
        )


FUSED = FusedElementwise()


class FusedGroup(Op):
    """One fused region's program run over several operand sets in one call: the members of a `fused_group`
    (each parameter's optimizer update, each batch norm's running statistics; graph/passes/horizontal.py).

    Inputs are the members' inputs in turn (`len(region.inputs)` each) and results the members' results in
    turn; `members` says how many there are.
    """

    name = "fused_group"
    differentiable = False
    fresh_output = True

    def infer(self, *inputs, region, members):
        n_in = len(region.inputs)
        specs = []
        for m in range(members):
            specs.extend(region.infer(list(inputs[m * n_in:(m + 1) * n_in])))
        return tuple(specs)

    def kernel(self, xp, *arrays, region, members):
        if xp is np:
            from ember.graph.codegen import run_group

            return tuple(run_group(region, members, arrays))
        n_in = len(region.inputs)
        return tuple(out for m in range(members) for out in region.evaluate(xp, list(arrays[m * n_in:(m + 1) * n_in])))

    def kernel_into(self, xp, *arrays, targets, region, members):
        """The kernel with some results (position -> array) written into the given arrays."""
        from ember.graph.codegen import run_group

        return tuple(run_group(region, members, arrays, targets))

    def vjp(self, ctx, *grads):
        raise RuntimeError("fused_group has no gradient: horizontal fusion runs after autodiff")


FUSED_GROUP = FusedGroup()
