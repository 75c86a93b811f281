"""DLPack: zero-copy exchange of tensors with NumPy, PyTorch, CuPy and any library with `__dlpack__`.

A CPU tensor's storage is a NumPy array and a CUDA tensor's a CuPy array, so the capsules are made
and read by those libraries; Ember adds the checks PyTorch makes (no export of tensors that require
grad, meta tensors have no memory) and bfloat16, which NumPy's DLPack does not know: it is exchanged
as 16-bit unsigned integers with the capsule's dtype code rewritten (DLPack's kDLBfloat).
"""

from __future__ import annotations

import ctypes
import enum
import weakref

import numpy as np

from ember.device import as_device


class DLDeviceType(enum.IntEnum):
    """DLPack's device codes (the ones Ember meets)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLCUDAManaged = 13


class DLPackError(BufferError, RuntimeError):
    """A tensor that can't be exchanged through DLPack (what consumers expect: a BufferError)."""


_kDLUInt, _kDLBfloat = 1, 4

# Private prototypes of the capsule API (setting argtypes on ctypes.pythonapi's would change them for everyone).
_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))


def _capsule_tensor(capsule) -> int:
    """The address of the DLTensor inside a DLPack capsule (legacy or versioned)."""
    name = _get_name(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise DLPackError(f"from_dlpack: expected an unused DLPack capsule, got one named {name!r}")
    ptr = _get_pointer(capsule, name)
    if name == b"dltensor":  # DLManagedTensor { DLTensor dl_tensor; ... }
        return ptr
    major = ctypes.c_uint32.from_address(ptr).value
    if major != 1:
        raise DLPackError(f"from_dlpack: DLPack version {major} is not supported (only 1.x)")
    # DLManagedTensorVersioned { DLPackVersion version; void *manager_ctx; deleter; uint64 flags; DLTensor }
    return ptr + 8 + 8 + 8 + 8


def _dtype_field(capsule) -> tuple:
    """(code, bits) of the capsule's DLTensor dtype, and the address of the code byte."""
    addr = _capsule_tensor(capsule) + 8 + 8 + 4  # DLTensor { void *data; DLDevice device; int32 ndim; DLDataType }
    return ctypes.c_uint8.from_address(addr).value, ctypes.c_uint8.from_address(addr + 1).value, addr


def _set_dtype_code(capsule, expect: tuple, code: int) -> None:
    old, bits, addr = _dtype_field(capsule)
    if (old, bits) != expect:
        raise DLPackError(f"DLPack: expected the dtype code/bits {expect}, found {(old, bits)}")
    ctypes.c_uint8.from_address(addr).value = code


def _is_bfloat16(dtype) -> bool:
    return dtype.name == "bfloat16" and dtype.kind == "V"


def _dl_device(tensor) -> tuple:
    dev = tensor._device
    if dev.type == "cuda":
        return (DLDeviceType.kDLCUDA, dev.index or 0)
    if dev.type == "cpu":
        return (DLDeviceType.kDLCPU, 0)
    if dev.type == "meta":
        raise DLPackError(f"__dlpack__: a meta tensor (shape {tuple(tensor.shape)}) has no memory to share")
    raise DLPackError(f"__dlpack__: tensors on {dev} can't be exported through DLPack")


def dlpack_device(tensor) -> tuple:
    """`Tensor.__dlpack_device__`: (DLDeviceType, device index)."""
    return _dl_device(tensor)


def export(tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """`Tensor.__dlpack__`: a DLPack capsule sharing the tensor's memory (a copy with copy=True)."""
    from ember import dispatch

    if tensor.requires_grad:
        raise DLPackError("__dlpack__: can't export a tensor that requires grad; use tensor.detach()")
    if dispatch.is_symbolic(tensor):
        raise DLPackError("__dlpack__: a symbolic tensor (inside ember.jit or a graph) has no memory to share")
    here = _dl_device(tensor)
    data = tensor._require_data("__dlpack__")
    if dl_device is not None and tuple(dl_device) != here:
        if tuple(dl_device) == (DLDeviceType.kDLCPU, 0) and copy is not False:
            data, here = tensor._device.backend.to_host(data), (DLDeviceType.kDLCPU, 0)
            copy = None  # already a fresh array
        else:
            raise DLPackError(f"__dlpack__: the tensor is on {tensor.device}; can't export it to DLPack device "
                              f"{tuple(dl_device)}" + (" without a copy" if copy is False else ""))
    if here[0] == DLDeviceType.kDLCPU:
        if stream is not None:
            raise ValueError(f"__dlpack__: stream must be None for a CPU tensor, got {stream!r}")
        if any(s < 0 for s in data.strides):
            if not copy:
                raise DLPackError(f"__dlpack__: the tensor has negative strides {data.strides}, which consumers "
                                  "such as PyTorch can't take; export a copy (copy=True or .contiguous())")
            data = np.ascontiguousarray(data)
            copy = None
    bf16 = _is_bfloat16(data.dtype)
    if bf16:
        data = data.view(np.uint16)
    kwargs = {} if max_version is None else {"max_version": tuple(max_version)}
    if copy is not None:
        kwargs["copy"] = copy
    if here[0] != DLDeviceType.kDLCPU and stream is not None:
        kwargs["stream"] = stream
    try:
        capsule = data.__dlpack__(**kwargs)
    except TypeError:  # an older NumPy/CuPy without the 2023.12 keywords: the legacy capsule
        if copy:
            data = data.copy()
        capsule = data.__dlpack__()
    except BufferError as e:
        read_only = not getattr(getattr(data, "flags", None), "writeable", True)
        hint = (" (the tensor is read-only, e.g. an expand() view: a consumer asking for DLPack 1.0 gets it "
                "flagged read-only, older ones need .clone())") if read_only else ""
        raise DLPackError(f"__dlpack__: {e}{hint}") from None
    if bf16:
        _set_dtype_code(capsule, (_kDLUInt, 16), _kDLBfloat)
    return capsule


class _Capsule:
    """A capsule already made (a legacy to_dlpack result, or one re-labelled) offered through the protocol."""

    def __init__(self, capsule, device) -> None:
        self.capsule = capsule
        self.device = device

    def __dlpack__(self, **kwargs):
        capsule, self.capsule = self.capsule, None
        if capsule is None:
            raise DLPackError("from_dlpack: a DLPack capsule can be consumed only once")
        return capsule

    def __dlpack_device__(self):
        return self.device


def _capsule_device(capsule) -> tuple:
    addr = _capsule_tensor(capsule) + 8
    return ctypes.c_int32.from_address(addr).value, ctypes.c_int32.from_address(addr + 4).value


_USED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}
_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)  # called with the GIL held, as producers' deleters may need
_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}  # DLPack type codes: int, uint, float, bool


def _np_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise TypeError(f"from_dlpack: vector dtypes ({lanes} lanes) are not supported")
    if code == _kDLBfloat and bits == 16:
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError('from_dlpack: bfloat16 data needs ml_dtypes: pip install "ember[bfloat16]"') from None
        return np.dtype(ml_dtypes.bfloat16)
    if code == 5:
        raise TypeError(f"from_dlpack: unsupported dtype complex{bits}: Ember has no complex types")
    if code not in _KINDS or bits % 8:
        raise TypeError(f"from_dlpack: DLPack dtype code {code} with {bits} bits is not one Ember has")
    return np.dtype(f"{_KINDS[code]}{bits // 8}")


def _array_from_capsule(capsule) -> np.ndarray:
    """A NumPy array over the CPU memory a DLPack capsule describes, which releases the producer's
    tensor (its deleter) when the last view of it is gone."""
    _capsule_tensor(capsule)  # checks the name and version
    name = _get_name(capsule)
    managed = _get_pointer(capsule, name)
    versioned = name == b"dltensor_versioned"
    t = managed + 32 if versioned else managed
    read_only = versioned and bool(ctypes.c_uint64.from_address(managed + 24).value & 1)
    deleter = ctypes.c_void_p.from_address(managed + (16 if versioned else 56)).value
    data = ctypes.c_void_p.from_address(t).value or 0
    ndim = ctypes.c_int32.from_address(t + 16).value
    dtype = _np_dtype(*(ctypes.c_uint8.from_address(t + 20 + i).value for i in (0, 1)),
                      ctypes.c_uint16.from_address(t + 22).value)
    shape = tuple((ctypes.c_int64 * ndim).from_address(ctypes.c_void_p.from_address(t + 24).value)) if ndim else ()
    strides_ptr = ctypes.c_void_p.from_address(t + 32).value
    if strides_ptr and ndim:
        strides = tuple((ctypes.c_int64 * ndim).from_address(strides_ptr))
    else:  # NULL strides: row-major
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
        strides = tuple(strides)
    data += ctypes.c_uint64.from_address(t + 40).value
    _set_name(capsule, _USED[name])  # ours now: the producer's capsule won't free it
    release = (lambda: _DELETER(deleter)(managed)) if deleter else (lambda: None)
    size = dtype.itemsize
    if any(d == 0 for d in shape):
        release()
        return np.empty(shape, dtype)
    lo = sum(min(0, (d - 1) * s) for d, s in zip(shape, strides))  # element offsets reached, lowest and highest
    hi = sum(max(0, (d - 1) * s) for d, s in zip(shape, strides))
    raw = (ctypes.c_char * ((hi - lo + 1) * size)).from_address(data + lo * size)
    owner = np.frombuffer(raw, np.uint8)  # keeps `raw` alive; when it goes, the producer's tensor is freed
    weakref.finalize(owner, release).atexit = False  # at exit the memory just goes with the process
    arr = np.ndarray(shape, dtype, buffer=owner, offset=-lo * size, strides=[s * size for s in strides])
    if read_only:
        arr.flags.writeable = False
    return arr


def _import_cpu(obj, copy):
    """A NumPy array over obj's memory (a copy with copy=True)."""
    if isinstance(obj, _Capsule):
        capsule = obj.__dlpack__()
    else:
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0's keywords
            capsule = obj.__dlpack__()
    arr = _array_from_capsule(capsule)
    return arr.copy() if copy else arr


def from_dlpack(ext_tensor, device=None, copy=None):
    """A tensor sharing the memory of anything with `__dlpack__` (NumPy, PyTorch, CuPy, JAX) or of a
    DLPack capsule; `copy=True` always copies, `copy=False` never does, `device` moves it."""
    from ember import dtypes as dt
    from ember.tensor import Tensor

    if copy not in (None, True, False):
        raise TypeError(f"from_dlpack: copy must be None, True or False, got {copy!r}")
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor, _capsule_device(ext_tensor))
    if not hasattr(ext_tensor, "__dlpack__") or not hasattr(ext_tensor, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ and __dlpack_device__ (or a DLPack "
                        f"capsule), got {type(ext_tensor).__name__}")
    kind, index = (int(v) for v in ext_tensor.__dlpack_device__())
    if kind in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        src = as_device("cpu")
        arr = _import_cpu(ext_tensor, copy)
    elif kind in (DLDeviceType.kDLCUDA, DLDeviceType.kDLCUDAManaged):
        from ember.backends import cuda

        cp = cuda._load_cupy()
        if cp is None:
            raise RuntimeError(f"from_dlpack: the data is on CUDA device {index}, but {cuda.unavailable_reason()}")
        src = as_device(f"cuda:{index}")
        with cp.cuda.Device(index):
            arr = cp.from_dlpack(ext_tensor)
            if copy:
                arr = arr.copy()
    else:
        raise DLPackError(f"from_dlpack: DLPack device type {kind} is not supported (Ember has CPU and CUDA)")
    try:
        dt.from_numpy_dtype(arr.dtype)
    except TypeError as e:
        raise TypeError(f"from_dlpack: {e}") from None
    t = Tensor._make(arr, src)
    if device is not None and as_device(device) != src:
        if copy is False:
            raise DLPackError(f"from_dlpack: the data is on {src}; moving it to {as_device(device)} needs a copy, "
                              "but copy=False")
        t = t.to(device)
    return t


def to_dlpack(tensor):
    """A DLPack capsule of `tensor` (torch.utils.dlpack.to_dlpack); consumed once by from_dlpack."""
    return export(tensor)
