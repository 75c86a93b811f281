"""Lazy layers, PyTorch's: LazyLinear and the LazyConv / LazyConvTranspose layers take their input size from their
first input (the lazy norms, built on the same mixin, are in lazy_norm.py). Until then their weights are
UninitializedParameters (and a norm's running statistics UninitializedBuffers) of no shape; the first forward (or
loading a state dict) gives them their shapes in place, so an optimizer built before holds the same objects,
initialises them as the eager layer would, and turns the module into that layer (LazyLinear becomes a Linear)."""

from __future__ import annotations

import itertools

from ember.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import UninitializedParameter, _swap_storage, is_lazy


class LazyModuleMixin:
    """The first forward's input (or a loaded state dict) sets the shapes; then the module becomes cls_to_become."""

    cls_to_become: type | None = None

    def _lazy_setup(self) -> None:
        self._lazy_hook = self.register_forward_pre_hook(LazyModuleMixin._infer_parameters)

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer still has no shape."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    @staticmethod
    def _infer_parameters(module, args) -> None:
        module.initialize_parameters(*args)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._become()

    def _become(self) -> None:
        self._lazy_hook.remove()
        del self._lazy_hook
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def _apply(self, fn):
        # Module._apply replaces buffers with fn(buffer), a plain tensor: keep each uninitialized one (moved or
        # cast in place, as parameters are) so the module stays lazy after .to(), .double(), ...
        lazy = {k: b for k, b in self._buffers.items() if is_lazy(b)}
        super()._apply(fn)
        for k, b in lazy.items():
            _swap_storage(b, self._buffers[k])
            self._buffers[k] = b
        return self

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        # an uninitialized tensor is saved as itself, as PyTorch does, so loading it leaves a lazy module lazy
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if is_lazy(t) and prefix + name in destination:
                destination[prefix + name] = t

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        load = super()._load_from_state_dict  # bound now: _become() below changes the class, and so the MRO
        if self.has_uninitialized_params():  # the saved tensors' shapes are the layer's
            for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
                value = state_dict.get(prefix + name)
                if is_lazy(t) and value is not None and not is_lazy(value):
                    t.materialize(value.shape)
            if not self.has_uninitialized_params():
                self._infer_sizes()
                self._become()
        load(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params():
            super().reset_parameters()


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is the last dim of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self._lazy_setup()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """Shape the weight (out_features, input's last dim) and the bias, and initialise them as Linear does."""
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()

    def _infer_sizes(self) -> None:
        self.in_features = self.weight.shape[1]


class _LazyConvMixin(LazyModuleMixin):
    dims = 2

    def _lazy_conv_setup(self, bias: bool) -> None:
        self.weight = UninitializedParameter(device=self.weight.device, dtype=self.weight.dtype)
        if bias:
            self.bias = UninitializedParameter(device=self.weight.device, dtype=self.weight.dtype)
        self._lazy_setup()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """Shape the weight from the input's channels (dim 1, or 0 unbatched) and initialise it as the layer does."""
        if self.has_uninitialized_params():
            self.in_channels = input.shape[1] if input.ndim == self.dims + 2 else input.shape[0]
            if self.in_channels % self.groups:
                raise ValueError(f"{type(self).__name__}: the input's {self.in_channels} channels do not divide into "
                                 f"groups={self.groups}")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _infer_sizes(self) -> None:
        self.in_channels = self.weight.shape[0] if self.transposed else self.weight.shape[1] * self.groups


def _lazy_conv(eager: type, dims: int) -> type:
    """The lazy form of a convolution layer: its arguments but in_channels."""

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        # in_channels = groups until the first input says otherwise (a valid layer to build, then made lazy)
        eager.__init__(self, groups, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                       device, dtype)
        self.in_channels = 0
        self._lazy_conv_setup(bias)

    def __init_transposed__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                            groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                            dtype=None) -> None:
        eager.__init__(self, groups, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                       padding_mode, device, dtype)
        self.in_channels = 0
        self._lazy_conv_setup(bias)

    init = __init_transposed__ if eager.__name__.startswith("ConvTranspose") else __init__
    return type(f"Lazy{eager.__name__}", (_LazyConvMixin, eager), {
        "__init__": init, "cls_to_become": eager, "dims": dims, "__module__": __name__,
        "__doc__": f"A {eager.__name__} whose in_channels is its first input's channel count."})


LazyConv1d = _lazy_conv(Conv1d, 1)
LazyConv2d = _lazy_conv(Conv2d, 2)
LazyConv3d = _lazy_conv(Conv3d, 3)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, 3)
