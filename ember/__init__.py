"""Ember: a deep-learning framework — tensors on devices, autograd, eager and graph execution."""

from ember import config as _config

_config.CPU_CAPABILITY.get()  # read at import by the kernels: a bad value fails here, not deep in their imports
from ember import dtypes as _dtypes
from ember.dtypes import (
    DType as dtype,
    bfloat16,
    bool_ as bool,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from ember.device import Device as device
from ember.device import get_default_device, set_default_device
from ember.precision import get_float32_matmul_precision, set_float32_matmul_precision, set_flush_denormal
from ember.printing import get_printoptions, set_printoptions
from ember.errors import (
    CheckpointError,
    ConcretizationError,
    DataDependentError,
    DeviceMismatchError,
    DomainError,
    DtypeError,
    IndexOutOfBoundsError,
    LinAlgError,
    ShapeError,
)
from ember.layout import layout, sparse_coo, strided
from ember.size import Size
from ember.type_info import finfo, iinfo
from ember.tensor import Tensor
from ember.version import __version__
from ember import ops
from ember.ops import *  # noqa: F403  (every op is public at the top level, as in PyTorch)
# torch.linalg's and torch.special's namespaces (not the ember.ops modules of the same names the line above brings)
linalg = __import__("importlib").import_module("ember.linalg")
special = __import__("importlib").import_module("ember.special")
from ember.creation import (
    arange,
    as_tensor,
    bernoulli,
    binomial,
    empty,
    eye,
    from_numpy,
    full,
    linspace,
    logspace,
    multinomial,
    normal,
    ones,
    poisson,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
)
from ember.random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from ember.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ember.autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from ember import autograd
from ember.transforms import (
    elementwise_grad,
    grad,
    hessian,
    hessian_tensor_product,
    hessian_vector_product,
    jacobian,
    make_jvp,
    make_vjp,
    tensor_jacobian_product,
    value_and_grad,
    vector_jacobian_product,
)
from ember import accelerator, cuda
from ember.typed_tensors import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from ember.serialization import load, save
from ember.dlpack import from_dlpack


float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
cfloat = None



def is_tensor(obj) -> "bool":
    """Whether obj is an Ember tensor."""
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> "int":
    """Number of elements of a tensor."""
    return input.numel()


del _dtypes

def _array_namespace(self, /, *, api_version=None):
    """The Array API namespace for this array (`ember.array_api`)."""
    if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
        raise ValueError(f"__array_namespace__: unsupported api_version {api_version!r}; Ember has 2024.12")
    from ember import array_api  # built on Tensor, so bound here, above both, and imported when first asked for

    return array_api


Tensor.__array_namespace__ = _array_namespace

_LAZY_SUBMODULES = (
    "nn", "optim", "data", "datasets", "models", "graph", "v1", "numpy", "profiler", "memory", "train", "runtime",
    "sparse", "distributions", "utils", "scipy", "misc", "test_util", "amp", "onnx", "array_api", "func",
)


_RUNTIME_NAMES = ("set_num_interop_threads", "get_num_interop_threads", "set_async", "is_async",
                  "synchronize")
_KERNEL_NAMES = ("set_num_threads", "get_num_threads")
# PyTorch's top-level forms of functional layers whose arguments are F's in F's order (torch.conv1d is F.conv1d),
# resolved from ember.nn.functional; torch.batch_norm, torch.embedding, torch.kl_div and the other losses take theirs
# in another order or a reduction code, so they are not here
_FUNCTIONAL_NAMES = (
    "adaptive_avg_pool1d", "alpha_dropout", "avg_pool1d", "bilinear", "celu", "celu_", "channel_shuffle", "conv1d",
    "conv3d", "conv_transpose1d", "conv_transpose3d", "cosine_similarity", "dropout", "feature_alpha_dropout",
    "group_norm", "hardshrink", "layer_norm", "max_pool1d", "max_pool1d_with_indices", "max_pool3d",
    "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "prelu", "rms_norm", "rrelu", "rrelu_", "selu",
    "selu_", "threshold", "threshold_",
)


def __getattr__(name: str):
    """Import subpackages on first use (`em.nn`, `em.optim`, ...), keeping `import ember` light."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"ember.{name}")
    if name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):
        from ember import amp

        return getattr(amp, name)
    if name == "sparse_coo_tensor":
        from ember.sparse import sparse_coo_tensor

        return sparse_coo_tensor
    if name == "summary":
        from ember.models.summary import summary

        return summary
    if name in _RUNTIME_NAMES:
        from ember import runtime as _runtime

        return getattr(_runtime, name)
    if name == "checkpoint":
        from ember.utils.checkpoint import checkpoint

        return checkpoint
    if name in _FUNCTIONAL_NAMES:
        from ember.nn import functional

        return getattr(functional, name)
    if name in _KERNEL_NAMES:
        from ember.kernels import parallel

        return getattr(parallel, name)
    if name in ("use_deterministic_algorithms", "are_deterministic_algorithms_enabled"):
        from ember.kernels import background

        return getattr(background, name)
    if name == "compile":
        from ember.compiler import compile

        return compile
    if name == "vmap":  # torch.vmap is torch.func.vmap
        from ember.func_transforms import vmap

        return vmap
    if name in ("jit", "is_tracing"):
        from ember.graph import jit as _jit

        return getattr(_jit, name)
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


if _config.ASYNC.get():  # EMBER_ASYNC=1: asynchronous eager mode from the start
    from ember.runtime.async_eager import set_async as _set_async

    _set_async(True)
