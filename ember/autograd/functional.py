"""`torch.autograd.functional`'s jacobian, hessian, vjp, jvp, hvp and vhp, where PyTorch's users find them; they are
built in the library layer (`ember/func_autograd.py`), which this module, loaded on first use, reaches up to."""

from ember.func_autograd import hessian, hvp, jacobian, jvp, vhp, vjp

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
