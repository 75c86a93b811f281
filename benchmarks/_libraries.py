"""The CPU kernel libraries benchmarks/cpu_libraries.py weighs against NumPy's OpenBLAS and Ember's kernels, each
loaded from its wheel through its C API with ctypes: oneMKL (`mkl`: cblas_sgemm), BLIS (`blis`: bli_sgemm) and
oneDNN (`onednn-cpu-gomp`: convolution forward and backward, matmul with bias and ReLU post-ops).

Each loader answers None with the reason where its wheel is absent or does not load, so the benchmark runs with
whichever are installed. The wheels put their shared libraries in <prefix>/lib (pip's data directory), which is
on no loader path: dependencies are loaded first by full path, RTLD_GLOBAL, so that the library's own NEEDED
entries (matched by soname) and its dlopen()s find them. Enum values are oneDNN v3.2's (include/oneapi/dnnl/
dnnl_types.h, dnnl_common_types.h; unchanged through v3.13).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import numpy as np

_P, _I, _L, _F = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float


# Where pip puts wheels' shared libraries (their data files go to <prefix>/lib); the benchmark's --lib-dir adds a
# directory in front (a wheel unpacked elsewhere).
LIB_DIRS = [os.path.join(sys.prefix, "lib")]


def _find(name: str) -> str | None:
    for d in LIB_DIRS:
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    return None


def needed(path: str) -> list[str]:
    """The NEEDED entries of a shared library's dynamic section (what ldd would resolve), read from its ELF header."""
    try:
        import subprocess

        out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def _installed_mb(dist: str) -> float:
    """Installed size of a distribution and the files it recorded, in MB (its RECORD's sizes)."""
    from importlib import metadata

    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return float("nan")
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f.locate())
        except OSError:
            pass
    return total / 1e6


def _requires(dist: str) -> list[str]:
    from importlib import metadata

    try:
        return [r.split(";")[0].split()[0].split("(")[0].split("=")[0].split("<")[0].split(">")[0]
                for r in metadata.requires(dist) or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:
        return []


def install_mb(dist: str) -> tuple[float, list[str]]:
    """(MB installed by `dist` and everything it requires, those distributions' names) from pip's records."""
    seen, order = set(), [dist]
    while order:
        name = order.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        order.extend(r for r in _requires(name) if r.lower() not in ("numpy",))
    return sum(_installed_mb(n) for n in seen), sorted(seen)


# --- oneMKL ---------------------------------------------------------------------------------------------------
MKL_THREADING = {"intel": 0, "sequential": 1, "tbb": 2, "gnu": 3}


class MKL:
    """oneMKL's single-dynamic library (libmkl_rt): cblas_sgemm, its threading layer and thread count."""

    def __init__(self, threading: str) -> None:
        path = _find("libmkl_rt.so.3") or _find("libmkl_rt.so.2")
        if path is None:
            raise OSError("libmkl_rt not found (pip install mkl)")
        if threading == "gnu":
            ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)  # libmkl_gnu_thread expects GOMP's symbols global
        elif threading == "intel":
            iomp = _find("libiomp5.so")
            if iomp:
                ctypes.CDLL(iomp, mode=ctypes.RTLD_GLOBAL)
        elif threading == "tbb":
            for dep in ("libtcm.so.1", "libtbb.so.12"):
                if _find(dep):
                    ctypes.CDLL(_find(dep), mode=ctypes.RTLD_GLOBAL)
        self.path = path
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.threading = threading
        self.lib.MKL_Set_Threading_Layer(_I(MKL_THREADING[threading]))
        self.sgemm = self.lib.cblas_sgemm
        self.sgemm.restype = None
        self.sgemm.argtypes = [_I, _I, _I, _I, _I, _I, _F, _P, _I, _P, _I, _F, _P, _I]
        self.lib.MKL_Set_Num_Threads.argtypes = [_I]
        self.lib.MKL_Set_Num_Threads_Local.argtypes = [_I]
        self.lib.MKL_Set_Num_Threads_Local.restype = _I

    def version(self) -> str:
        """MKL's version line and the threading layer in use."""
        buf = ctypes.create_string_buffer(256)
        self.lib.MKL_Get_Version_String(buf, 256)
        return f"{buf.value.decode().split(' for ')[0]}, {self.threading} threading"

    def set_threads(self, n: int) -> None:
        """MKL's process-wide thread count (mkl_set_num_threads)."""
        self.lib.MKL_Set_Num_Threads(n)

    def set_threads_local(self, n: int) -> int:
        """The calling thread's MKL thread count (mkl_set_num_threads_local; 0 returns to the global one); returns
        the previous local setting."""
        return self.lib.MKL_Set_Num_Threads_Local(n)

    def matmul(self, a: np.ndarray, b: np.ndarray, out: np.ndarray):
        """A zero-argument call computing out = a @ b (2-D float32; a and b C-contiguous or transposed views)."""
        return _cblas_call(self.sgemm, a, b, out)


def _trans(x: np.ndarray) -> tuple[int, int]:
    """(CBLAS transpose flag, leading dimension) for a row-major view of a 2-D float32 array."""
    if x.strides[1] == 4 and x.strides[0] % 4 == 0:
        return 111, x.strides[0] // 4
    if x.strides[0] == 4 and x.strides[1] % 4 == 0:
        return 112, x.strides[1] // 4
    raise ValueError(f"cblas_sgemm: a {x.shape} array with strides {x.strides} is neither row- nor column-major")


def _cblas_call(sgemm, a, b, out):
    (m, k), n = a.shape, b.shape[1]
    (ta, lda), (tb, ldb) = _trans(a), _trans(b)
    args = (101, ta, tb, m, n, k, _F(1.0), a.ctypes.data, lda, b.ctypes.data, ldb, _F(0.0), out.ctypes.data, n)
    return lambda: sgemm(*args)


# --- BLIS ------------------------------------------------------------------------------------------------------
class BLIS:
    """BLIS as the `blis` wheel builds it into its Python extension (cython-blis): the typed API's bli_sgemm, which
    takes row and column strides (no CBLAS layer is exported)."""

    def __init__(self) -> None:
        import blis

        found = glob.glob(os.path.join(os.path.dirname(blis.__file__), "cy.*.so"))
        if not found:
            raise OSError("blis/cy.*.so not found")
        self.path = found[0]
        self.lib = ctypes.CDLL(self.path)
        self.lib.bli_init()
        self.sgemm = self.lib.bli_sgemm
        self.sgemm.restype = None
        self.sgemm.argtypes = [_I, _I, _L, _L, _L, _P, _P, _L, _L, _P, _L, _L, _P, _P, _L, _L]
        self.lib.bli_arch_string.restype = ctypes.c_char_p
        self.lib.bli_info_get_version_str.restype = ctypes.c_char_p
        self._one, self._zero = _F(1.0), _F(0.0)

    def version(self) -> str:
        """BLIS's version, the kernel configuration it picked for this CPU and its threading."""
        arch = self.lib.bli_arch_string(self.lib.bli_arch_query_id()).decode()
        threads = [name for name in ("openmp", "pthreads") if getattr(self.lib, f"bli_info_get_enable_{name}")()]
        return (f"BLIS {self.lib.bli_info_get_version_str().decode()}, kernels {arch}, "
                f"threading {'/'.join(threads) or 'none (single-threaded build)'}")

    def set_threads(self, n: int) -> None:
        """BLIS's thread count (no effect in a single-threaded build)."""
        self.lib.bli_thread_set_num_threads(_L(n))

    def matmul(self, a, b, out):
        """A zero-argument call computing out = a @ b (2-D float32, any strides in whole elements)."""
        (m, k), n = a.shape, b.shape[1]
        args = (0, 0, m, n, k, ctypes.byref(self._one), a.ctypes.data, a.strides[0] // 4, a.strides[1] // 4,
                b.ctypes.data, b.strides[0] // 4, b.strides[1] // 4, ctypes.byref(self._zero), out.ctypes.data,
                out.strides[0] // 4, out.strides[1] // 4)
        return lambda: self.sgemm(*args)


# --- oneDNN ----------------------------------------------------------------------------------------------------
F32, TAG_ANY = 3, 1
TAGS = {2: 3, 3: 4, 4: 5, 5: 6}  # plain row-major tag (ab, abc, abcd, abcde) by number of dimensions
FORWARD_TRAINING, FORWARD_INFERENCE, BACKWARD_DATA, BACKWARD_WEIGHTS = 64, 96, 160, 192
CONVOLUTION_DIRECT, ELTWISE_RELU = 1, 0x20
QUERY_IMPL_INFO_STR, QUERY_EXEC_ARG_MD = 8, 255
QUERY_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DST_MD = 129, 131, 133
QUERY_DIFF_SRC_MD, QUERY_DIFF_WEIGHTS_MD, QUERY_DIFF_DST_MD = 130, 132, 134
ARG_SRC, ARG_WEIGHTS, ARG_BIAS, ARG_DST = 1, 33, 41, 17
ARG_DIFF_SRC, ARG_DIFF_WEIGHTS, ARG_DIFF_DST = 129, 161, 145
DIMS = _L * 12  # dnnl_dims_t


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", _I), ("memory", _P)]


class _Version(ctypes.Structure):
    _fields_ = [("major", _I), ("minor", _I), ("patch", _I), ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


_RUNTIMES = {0: "none", 1: "sequential", 2: "OpenMP", 4: "TBB", 8: "threadpool", 256: "OpenCL", 512: "SYCL"}


class OneDNN:
    """oneDNN's C API: a CPU engine and stream, and primitives built for fixed shapes and run on arrays in place."""

    def __init__(self) -> None:
        path = _find("libdnnl.so.3")
        if path is None:
            raise OSError("libdnnl.so.3 not found (pip install onednn-cpu-gomp)")
        for dep in needed(path):  # the SYCL build's runtimes, TBB, Intel's math libraries: whichever it names
            if _find(dep):
                ctypes.CDLL(_find(dep), mode=ctypes.RTLD_GLOBAL)
        self.path = path
        self.lib = lib = ctypes.CDLL(path)
        lib.dnnl_version.restype = ctypes.POINTER(_Version)
        lib.dnnl_primitive_desc_query_md.restype = _P
        lib.dnnl_primitive_desc_query_md.argtypes = [_P, _I, _I]
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        lib.dnnl_memory_desc_get_size.argtypes = [_P]
        lib.dnnl_memory_desc_equal.argtypes = [_P, _P]
        lib.dnnl_memory_set_data_handle.argtypes = [_P, _P]
        lib.dnnl_primitive_execute.argtypes = [_P, _P, _I, _P]
        lib.dnnl_stream_wait.argtypes = [_P]
        self.engine, self.stream = _P(), _P()
        self._check(lib.dnnl_engine_create(ctypes.byref(self.engine), 1, ctypes.c_size_t(0)), "engine_create(cpu)")
        self._check(lib.dnnl_stream_create(ctypes.byref(self.stream), self.engine, ctypes.c_uint(1)), "stream_create")
        self._keep: list = []  # descriptors and memories the primitives use, kept for the process

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"oneDNN {what} failed with status {status}")

    def version(self) -> str:
        """oneDNN's version, CPU runtime and the instruction set its JIT targets here."""
        v = self.lib.dnnl_version().contents
        isa = {39: "AVX-512 core", 7: "AVX2", 4079: "AVX-512 core + AMX"}.get(self.lib.dnnl_get_effective_cpu_isa(), "?")
        return f"oneDNN {v.major}.{v.minor}.{v.patch}, CPU runtime {_RUNTIMES.get(v.cpu_runtime, v.cpu_runtime)}, ISA {isa}"

    def _md(self, dims, tag: int | None = None) -> _P:
        md = _P()
        self._check(self.lib.dnnl_memory_desc_create_with_tag(ctypes.byref(md), len(dims), DIMS(*dims), F32,
                                                              TAGS[len(dims)] if tag is None else tag), "memory_desc")
        self._keep.append(md)
        return md

    def _memory(self, md, allocate: bool = False) -> _P:
        """A memory object for `md`: with no buffer (one is bound before each call), or its own (`allocate`)."""
        mem = _P()
        handle = _P(-1) if allocate else None  # DNNL_MEMORY_ALLOCATE: the library allocates the buffer
        self._check(self.lib.dnnl_memory_create(ctypes.byref(mem), md, self.engine, handle), "memory_create")
        self._keep.append(mem)
        return mem

    def _primitive(self, pd) -> _P:
        prim = _P()
        self._check(self.lib.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive_create")
        self._keep.append(prim)
        return prim

    def _impl(self, pd) -> str:
        out = ctypes.c_char_p()
        self.lib.dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, ctypes.byref(out))
        return out.value.decode()

    def _bind(self, prim, pd, arrays: dict, mds: dict | None = None) -> tuple:
        """A zero-argument call running `prim` on `arrays` (oneDNN argument -> NumPy array; plain layout unless
        `mds` gives the argument's descriptor), each bound by pointer at every call as an integration would, and
        the implementation's name."""
        args = (_ExecArg * len(arrays))()
        mems = []
        for k, (arg, array) in enumerate(arrays.items()):
            mem = self._memory((mds or {}).get(arg) or self._md(array.shape))
            args[k].arg, args[k].memory = arg, mem
            mems.append((mem, array))
        lib, stream, n = self.lib, self.stream, len(arrays)

        def run():
            for mem, array in mems:
                lib.dnnl_memory_set_data_handle(mem, array.ctypes.data)
            status = lib.dnnl_primitive_execute(prim, stream, n, args)
            if status:
                raise RuntimeError(f"oneDNN execute failed with status {status}")
            lib.dnnl_stream_wait(stream)

        return run, self._impl(pd)

    def _conv_geometry(self, stride, padding, dilation):
        (sh, sw), (pt, pb, pl, pr), (dh, dw) = stride, padding, dilation
        return DIMS(sh, sw), DIMS(dh - 1, dw - 1), DIMS(pt, pl), DIMS(pb, pr)

    @staticmethod
    def _weight_dims(w_shape, groups):
        o, cg, kh, kw = w_shape
        return (groups, o // groups, cg, kh, kw) if groups > 1 else tuple(w_shape)

    def _forward_pd(self, x_shape, w_shape, y_shape, stride, padding, dilation, groups, prop, tag=None):
        """A convolution forward descriptor (for `prop`); tag None: plain layouts, TAG_ANY: oneDNN's choice."""
        pd = _P()
        s, d, pl, pr = self._conv_geometry(stride, padding, dilation)
        self._check(self.lib.dnnl_convolution_forward_primitive_desc_create(
            ctypes.byref(pd), self.engine, prop, CONVOLUTION_DIRECT, self._md(x_shape, tag),
            self._md(self._weight_dims(w_shape, groups), tag), None, self._md(y_shape, tag), s, d, pl, pr, None),
            "convolution_forward")
        self._keep.append(pd)
        return pd

    def conv2d(self, x, w, y, stride, padding, dilation, groups, blocked=False):
        """(call, implementation): y = conv2d(x, w) on NCHW arrays as they lie (forward inference); `blocked`: in the
        layouts oneDNN prefers, with reorders from and to NCHW (see `_blocked`)."""
        pd = self._forward_pd(x.shape, w.shape, y.shape, stride, padding, dilation, groups, FORWARD_INFERENCE,
                              TAG_ANY if blocked else None)
        wv = w.reshape(self._weight_dims(w.shape, groups))
        bind = self._blocked if blocked else self._bind
        return bind(self._primitive(pd), pd, {ARG_SRC: x, ARG_WEIGHTS: wv, ARG_DST: y})

    def conv2d_input_grad(self, g, w, dx, stride, padding, dilation, groups, blocked=False):
        """(call, implementation): dx = the input gradient of conv2d from output gradient g (conv_transpose2d)."""
        return self._backward("data", dx, w, g, stride, padding, dilation, groups, blocked,
                              {ARG_DIFF_DST: g, ARG_DIFF_SRC: dx})

    def conv2d_weight_grad(self, x, g, dw, stride, padding, dilation, groups, blocked=False):
        """(call, implementation): dw = the weight gradient of conv2d."""
        return self._backward("weights", x, dw, g, stride, padding, dilation, groups, blocked,
                              {ARG_SRC: x, ARG_DIFF_DST: g})

    def _backward(self, which, x, w, g, stride, padding, dilation, groups, blocked, arrays):
        """A convolution's backward primitive (`which`: "data" or "weights") for input x, weight w and output
        gradient g (the one it writes among them in `arrays` is added here as the weight), bound to `arrays`."""
        tag = TAG_ANY if blocked else None
        hint = self._forward_pd(x.shape, w.shape, g.shape, stride, padding, dilation, groups, FORWARD_TRAINING, tag)
        pd = _P()
        s, d, pl, pr = self._conv_geometry(stride, padding, dilation)
        x_md, w_md, g_md = self._md(x.shape, tag), self._md(self._weight_dims(w.shape, groups), tag), \
            self._md(g.shape, tag)
        if which == "data":
            status = self.lib.dnnl_convolution_backward_data_primitive_desc_create(
                ctypes.byref(pd), self.engine, CONVOLUTION_DIRECT, x_md, w_md, g_md, s, d, pl, pr, hint, None)
        else:
            status = self.lib.dnnl_convolution_backward_weights_primitive_desc_create(
                ctypes.byref(pd), self.engine, CONVOLUTION_DIRECT, x_md, w_md, None, g_md, s, d, pl, pr, hint, None)
        self._check(status, f"convolution_backward_{which}")
        self._keep.append(pd)
        wv = w.reshape(self._weight_dims(w.shape, groups))
        arrays = {**arrays, (ARG_WEIGHTS if which == "data" else ARG_DIFF_WEIGHTS): wv}
        bind = self._blocked if blocked else self._bind
        return bind(self._primitive(pd), pd, arrays)

    def _blocked(self, prim, pd, arrays: dict) -> tuple:
        """((call with reorders, call of the primitive alone), implementation) for a primitive created with layouts
        of oneDNN's choosing: the first reorders each input from its plain array into the chosen layout, runs the
        primitive, and reorders the output back (what an NCHW framework calling oneDNN pays per call); the second
        runs the primitive alone on the reordered buffers (the bound for a framework that keeps oneDNN's layouts
        from layer to layer). The output is the array whose argument is written (DST, DIFF_SRC, DIFF_WEIGHTS)."""
        outputs = (ARG_DST, ARG_DIFF_SRC, ARG_DIFF_WEIGHTS)
        inner, steps = {}, []
        for arg, array in arrays.items():
            chosen = _P(self.lib.dnnl_primitive_desc_query_md(pd, QUERY_EXEC_ARG_MD, arg))
            plain = self._md(array.shape)
            mem = self._memory(chosen, allocate=True)
            inner[arg] = mem
            if not self.lib.dnnl_memory_desc_equal(chosen, plain):
                src, dst = (chosen, plain) if arg in outputs else (plain, chosen)
                steps.append((arg in outputs, self._reorder(src, dst), array, mem, self._memory(plain)))
            else:
                steps.append((arg in outputs, None, array, mem, None))
        args = (_ExecArg * len(inner))(*[_ExecArg(arg, mem) for arg, mem in inner.items()])
        lib, stream, n = self.lib, self.stream, len(inner)
        exec_pair = _ExecArg * 2

        def reorder(prim_r, frm, to):
            lib.dnnl_primitive_execute(prim_r, stream, 2, exec_pair(_ExecArg(ARG_SRC, frm), _ExecArg(ARG_DST, to)))

        def kernel():
            status = lib.dnnl_primitive_execute(prim, stream, n, args)
            if status:
                raise RuntimeError(f"oneDNN execute failed with status {status}")
            lib.dnnl_stream_wait(stream)

        def run():
            for is_out, prim_r, array, mem, plain_mem in steps:
                if prim_r is None:
                    lib.dnnl_memory_set_data_handle(mem, array.ctypes.data)
                elif not is_out:
                    lib.dnnl_memory_set_data_handle(plain_mem, array.ctypes.data)
                    reorder(prim_r, plain_mem, mem)
            kernel()
            for is_out, prim_r, array, mem, plain_mem in steps:
                if is_out and prim_r is not None:
                    lib.dnnl_memory_set_data_handle(plain_mem, array.ctypes.data)
                    reorder(prim_r, mem, plain_mem)
            lib.dnnl_stream_wait(stream)

        run()  # fills the blocked buffers, so `kernel` alone reads real values
        return (run, kernel), self._impl(pd)

    def _reorder(self, src_md, dst_md) -> _P:
        pd = _P()
        self._check(self.lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), src_md, self.engine, dst_md,
                                                                self.engine, None), "reorder")
        self._keep.append(pd)
        return self._primitive(pd)

    def matmul(self, a, b, out, bias=None, relu=False):
        """(call, implementation): out = a @ b (+ bias) (then ReLU), the bias and ReLU as post-ops of the GEMM.
        Transposed views of `a` or `b` are described by their strides."""
        attr = None
        if relu:
            post, attr = _P(), _P()
            self._check(self.lib.dnnl_post_ops_create(ctypes.byref(post)), "post_ops_create")
            self._check(self.lib.dnnl_post_ops_append_eltwise(post, ELTWISE_RELU, _F(0.0), _F(0.0)), "eltwise")
            self._check(self.lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "attr_create")
            self._check(self.lib.dnnl_primitive_attr_set_post_ops(attr, post), "set_post_ops")
            self._keep += [post, attr]
        a_md, b_md = self._strided_md(a), self._strided_md(b)
        bias_md = None if bias is None else self._md((1, bias.shape[0]))
        pd = _P()
        self._check(self.lib.dnnl_matmul_primitive_desc_create(ctypes.byref(pd), self.engine, a_md, b_md, bias_md,
                                                               self._md(out.shape), attr), "matmul")
        self._keep.append(pd)
        arrays = {ARG_SRC: a, ARG_WEIGHTS: b, ARG_DST: out}
        if bias is not None:
            arrays[ARG_BIAS] = bias.reshape(1, -1)
        return self._bind(self._primitive(pd), pd, arrays, {ARG_SRC: a_md, ARG_WEIGHTS: b_md})

    def _strided_md(self, x) -> _P:
        md = _P()
        self._check(self.lib.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), x.ndim, DIMS(*x.shape), F32, DIMS(*(s // x.itemsize for s in x.strides))),
            "memory_desc_with_strides")
        self._keep.append(md)
        return md


def openmp_set_threads(n: int) -> None:
    """omp_set_num_threads(n) in the process's GNU OpenMP (PyTorch's and the gomp build of oneDNN share it: one
    runtime, soname libgomp.so.1); affects parallel regions the calling thread starts."""
    gomp = ctypes.CDLL("libgomp.so.1")
    gomp.omp_set_num_threads(_I(n))
