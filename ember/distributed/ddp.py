"""`DistributedDataParallel`: one replica of a module per rank, gradients averaged during backward.

At construction rank 0's parameters and buffers are copied to every rank. Gradients are reduced in
buckets (PyTorch's Reducer): parameters are grouped in reverse order of `parameters()` (about the
order backward produces their gradients), at most `bucket_cap_mb` per bucket (1 MB for the first, so
communication starts early); after the first iteration the buckets are rebuilt in the order the
gradients actually arrived (rank 0's order, so every rank agrees). A post-accumulate-grad hook copies
each gradient into its bucket; a full bucket starts a nonblocking allreduce at once, in bucket order,
so communication overlaps the rest of the backward pass. The hook that completes the last bucket
waits for all of them and writes the averaged gradients back into `.grad`, so they are there when
`backward()` returns. Under ember.jit the same hooks build graph nodes: a start and a wait per bucket
(ops.all_reduce_start_op/all_reduce_wait_op), which the dependency engine overlaps with the remaining steps.
`register_comm_hook(state, hook)` replaces a bucket's allreduce with the hook's own communication
(algorithms/ddp_comm_hooks: fp16/bf16 compression): it gets a GradBucket and returns a Future of the
averaged buffer.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ember.autograd import walk
from ember.autograd.engine import Node
from ember.autograd.grad_mode import is_grad_enabled, no_grad
from ember.dispatch import apply, is_tracing
from ember.distributed import checks
from ember.distributed.errors import DistError
from ember.distributed.futures import Future
from ember.distributed.grad_bucket import GradBucket
from ember.distributed.group import resolve
from ember.distributed.ops import all_reduce_start_op, all_reduce_wait_op
from ember.distributed.reduce_op import ReduceOp
from ember.distributed.work import CompletedWork, Work, blocking_call
from ember.nn.modules.module import Module

DEFAULT_BUCKET_MB = 25.0
FIRST_BUCKET_MB = 1.0  # PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    """Parameters whose gradients travel together in one flat buffer."""

    def __init__(self, params: list, dtype) -> None:
        self.params = params
        self.dtype = dtype
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.flat = np.empty(n, dtype)
        self.pending = len(params)
        self.work: Work | None = None
        self.graph_start = None  # under ember.jit: the symbolic result of this bucket's start node
        self.future: Future | None = None  # with a comm hook: the hook's future of the averaged buffer

    def reset(self) -> None:
        self.pending = len(self.params)
        self.work = None
        self.graph_start = None
        self.future = None


def _assign_buckets(params: list, first_cap: float, cap: float) -> list:
    """Consecutive params (same dtype) up to `cap` bytes per bucket; the first bucket up to `first_cap`."""
    buckets, cur, size, limit = [], [], 0, first_cap
    for p in params:
        nbytes = p.numel() * p._data.dtype.itemsize
        if cur and (size + nbytes > limit or p._data.dtype != cur[0]._data.dtype):
            buckets.append(_Bucket(cur, cur[0]._data.dtype))
            cur, size, limit = [], 0, cap
        cur.append(p)
        size += nbytes
    if cur:
        buckets.append(_Bucket(cur, cur[0]._data.dtype))
    return buckets


class _Reducer:
    """The bucketed gradient allreduce of one DistributedDataParallel."""

    def __init__(self, ddp, params: list, cap_bytes: float, find_unused: bool) -> None:
        self.ddp = ddp
        self.group = ddp.process_group
        self.params = params
        self.cap = cap_bytes
        self.find_unused = find_unused
        self.index = {id(p): i for i, p in enumerate(params)}
        self._build(list(reversed(range(len(params)))))
        self.rebuilt = False
        self.ready_order: list = []  # param indices in the order their gradients arrived (first iteration)
        self.expect = False  # a forward asked for the next backward's gradients to be reduced
        self.started = False  # a hook of that backward has fired
        self.unused: list = []
        self.marked_unused = False
        self._is_ready: dict = {}
        self.used = np.zeros(len(params), np.int32)
        self.comm_hook = None  # (state, hook) from register_comm_hook
        self.handles = [p.register_post_accumulate_grad_hook(self._hook) for p in params]

    def _build(self, order: list) -> None:
        self.buckets = _assign_buckets([self.params[i] for i in order], min(FIRST_BUCKET_MB * 2**20, self.cap), self.cap)
        self.where = {}
        for b, bucket in enumerate(self.buckets):
            for k, p in enumerate(bucket.params):
                self.where[id(p)] = (b, k)
        self.next_bucket = 0

    # --- one iteration --------------------------------------------------------------------------------
    def prepare(self, outputs) -> None:
        """Called by forward: the next backward reduces gradients (finding unused parameters if asked)."""
        self.check_finished()
        if not self.rebuilt and self.ready_order and not is_tracing():
            self._rebuild()
        for b in self.buckets:
            b.reset()
        self.next_bucket = 0
        self.started = False
        self.marked_unused = False
        self.used[:] = 0
        self.expect = True
        self.unused = []
        if self.find_unused:
            reached = set()
            roots = [t._grad_fn for t in _tensors(outputs) if t._grad_fn is not None]
            for node in walk(roots):
                for edge in node.edges:
                    if edge is not None and type(edge[0]) is not Node:
                        reached.add(id(edge[0]))
            roots_leaves = {id(t) for t in _tensors(outputs) if t._grad_fn is None and t._requires_grad}
            self.unused = [p for p in self.params if id(p) not in reached and id(p) not in roots_leaves]

    def check_finished(self) -> None:
        """PyTorch's error when the previous backward left buckets unreduced (a parameter got no gradient)."""
        if not (self.expect and self.started):
            return
        missing = [self.index[id(p)] for b in self.buckets for p in b.params
                   if b.work is None and b.graph_start is None and b.future is None and self._not_ready(p)]
        self.expect = False
        raise DistError(
            "Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. You can enable "
            "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
            "DistributedDataParallel, and by making sure all `forward` function outputs participate in calculating "
            f"loss. Parameter indices which did not receive grad for rank {self.group.rank()}: "
            f"{' '.join(map(str, sorted(missing)))}")

    def _not_ready(self, p) -> bool:
        return not self._is_ready.get(id(p), False)

    def _hook(self, p) -> None:
        if not self.expect:
            return  # no_sync(), eval, or a backward whose forward was not through this DDP
        if not self.started:
            self.started = True
            self._is_ready = {}
        if self.unused and not self.marked_unused:
            self.marked_unused = True
            for q in self.unused:
                self._mark_ready(q, None)
        self.used[self.index[id(p)]] = 1
        if not self.rebuilt:
            self.ready_order.append(self.index[id(p)])
        self._mark_ready(p, p.grad)

    def _mark_ready(self, p, grad) -> None:
        if self._is_ready.get(id(p)):
            raise DistError(f"DistributedDataParallel on rank {self.group.rank()}: parameter {self.index[id(p)]} got "
                            "its gradient twice in one backward pass (a module used twice with reentrant backward?)")
        self._is_ready[id(p)] = True
        b, k = self.where[id(p)]
        bucket = self.buckets[b]
        if not is_tracing():
            view = bucket.flat[bucket.offsets[k]:bucket.offsets[k] + p.numel()]
            if grad is None:
                view[...] = 0
            else:
                view[...] = _host(grad).reshape(-1)
        bucket.pending -= 1
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self._finish()
        else:
            for bk in self.buckets[:self.next_bucket]:  # polling lets MPI move the started reductions on
                if bk.work is not None:
                    bk.work.is_completed()

    def _launch(self, bucket: _Bucket) -> None:
        pg = self.group
        if self.comm_hook is not None:
            self._run_comm_hook(bucket)
            return
        if is_tracing():
            bucket.graph_start = apply(all_reduce_start_op, _traced_flat(bucket), group=pg)
            return
        seq = pg.enter()
        # the buckets match by construction (same module on every rank, rank 0's order): compared at DETAIL only
        checks.check(pg, "DistributedDataParallel", seq, bucket.flat.dtype, bucket.flat.shape, detail_only=True)
        what = "all_reduce (DistributedDataParallel)"
        if bucket is self.buckets[-1]:  # nothing left to overlap with: MPI's faster blocking call
            blocking_call(pg.transport, lambda: pg.transport.allreduce(bucket.flat, ReduceOp.SUM), what,
                          pg.members, (pg, seq))
            bucket.work = CompletedWork(what)
            return
        bucket.work = Work(what, pg.transport, pg.transport.iallreduce(bucket.flat, ReduceOp.SUM),
                           members=pg.members, where=(pg, seq))

    def _run_comm_hook(self, bucket: _Bucket) -> None:
        """Hand the bucket to the registered hook; keep the Future it returns."""
        from ember.creation import from_numpy

        state, hook = self.comm_hook
        index = self.buckets.index(bucket)
        flat = _traced_flat(bucket) if is_tracing() else from_numpy(bucket.flat)  # the bucket's memory, not a copy
        fut = hook(state, GradBucket(index, flat, bucket.params, bucket.offsets, bucket is self.buckets[-1]))
        if not isinstance(fut, Future):
            raise TypeError(f"DistributedDataParallel: the comm hook {getattr(hook, '__name__', hook)!r} returned "
                            f"{type(fut).__name__}; it must return a Future of the bucket's averaged buffer "
                            "(e.g. dist.all_reduce(..., async_op=True).get_future())")
        bucket.future = fut

    def _hooked(self, bucket: _Bucket, index: int):
        """The averaged buffer a comm hook's future gave for `bucket`: its host array, or (traced) the tensor."""
        value = bucket.future.wait()
        bucket.future = None
        if isinstance(value, (list, tuple)) and len(value) == 1:  # a Work's future: its output tensors
            value = value[0]
        numel = bucket.flat.size
        if not hasattr(value, "numel") or value.numel() != numel:
            got = f"a tensor of {value.numel()} elements" if hasattr(value, "numel") else type(value).__name__
            raise DistError(f"DistributedDataParallel on rank {self.group.rank()}: the comm hook's future for bucket "
                            f"{index} gave {got}; it must give the bucket's buffer ({numel} elements)")
        return value.reshape(-1) if is_tracing() else _host(value).reshape(-1)

    def _finish(self) -> None:
        """Every bucket started: wait for them in order and write the averaged gradients into .grad."""
        self.expect = False
        n = self.group.size()
        globally_used = None
        if self.find_unused and not is_tracing():
            globally_used = self.used.copy()
            seq = self.group.enter()
            Work("all_reduce (DistributedDataParallel unused parameters)", self.group.transport,
                 self.group.transport.iallreduce(globally_used, ReduceOp.MAX), members=self.group.members,
                 where=(self.group, seq)).wait()
        for index, bucket in enumerate(self.buckets):
            if bucket.future is not None:  # a comm hook averaged the bucket itself
                reduced = self._hooked(bucket, index)
                for p, off in zip(bucket.params, bucket.offsets):
                    if is_tracing():
                        p.grad = reduced[off:off + p.numel()].reshape(p.shape).to(p.dtype)
                    elif globally_used is None or globally_used[self.index[id(p)]]:
                        _write_grad(p, reduced[off:off + p.numel()], 1)
                continue
            if is_tracing():
                reduced = apply(all_reduce_wait_op, bucket.graph_start, group=self.group, divisor=n)
                bucket.graph_start = None  # a symbolic tensor kept after the trace would count as state made by it
                for p, off in zip(bucket.params, bucket.offsets):
                    p.grad = reduced[off:off + p.numel()].reshape(p.shape)
                continue
            bucket.work.wait()
            for p, off in zip(bucket.params, bucket.offsets):
                if globally_used is not None and not globally_used[self.index[id(p)]]:
                    continue  # no rank used it: its gradient stays as it was (PyTorch's rule)
                _write_grad(p, bucket.flat[off:off + p.numel()], n)

    def _rebuild(self) -> None:
        """Rebuild the buckets in the order gradients arrived in the first iteration (rank 0's order)."""
        self.rebuilt = True
        seen = set()
        order = [i for i in self.ready_order if not (i in seen or seen.add(i))]
        order += [i for i in reversed(range(len(self.params))) if i not in seen]
        arr = np.array(order, np.int64)
        seq = self.group.enter()
        Work("broadcast (DistributedDataParallel bucket order)", self.group.transport,
             self.group.transport.ibcast(arr, 0), members=self.group.members, where=(self.group, seq)).wait()
        self._build(arr.tolist())


def _traced_flat(bucket: _Bucket):
    """Under ember.jit: the bucket's gradients concatenated (symbolic), zeros for a parameter without one."""
    from ember import ops

    grads = [q.grad if q.grad is not None else ops.zeros_like(q) for q in bucket.params]
    # a tensor of its own, not a view of a gradient: a comm hook may write into it (buffer.copy_)
    return ops.cat([g.reshape(-1) for g in grads]) if len(grads) > 1 else grads[0].reshape(-1).clone()


def _tensors(obj):
    """The tensors in a (nested) forward output."""
    from ember.tensor import Tensor

    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _host(t) -> np.ndarray:
    data = t._data
    if type(data) is np.ndarray:
        return data
    if getattr(type(data), "pending", False):
        t._require_data("DistributedDataParallel")
        return t._data
    return t._device.backend.to_host(data)


def _write_grad(p, summed: np.ndarray, n: int) -> None:
    """p.grad = summed / n (the average), written in place where p.grad is a host array: one pass."""
    g = p.grad
    if g is not None and type(g._data) is np.ndarray:
        np.divide(summed.reshape(g._data.shape), n, out=g._data, casting="unsafe")
        g._version[0] += 1
        return
    values = summed / n if n != 1 else summed.copy()
    if g is None:
        from ember.tensor import Tensor

        p.grad = Tensor._make(p._device.backend.from_host(values.reshape(p.shape).astype(summed.dtype, copy=False)),
                              p._device)
        return
    backend = g._device.backend
    backend.xp.copyto(g._data, backend.from_host(values.reshape(g.shape)))
    g._version[0] += 1


class DistributedDataParallel(Module):
    """Data parallelism across the ranks of a process group (PyTorch's DistributedDataParallel)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an ember.nn.Module, got {type(module).__name__}")
        if gradient_as_bucket_view:
            raise NotImplementedError("DistributedDataParallel: gradient_as_bucket_view=True is not supported")
        self.module = module
        self.process_group = resolve(process_group, "DistributedDataParallel")
        if not self.process_group.is_member:
            raise ValueError("DistributedDataParallel: this rank is not a member of process_group")
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        cap = DEFAULT_BUCKET_MB if bucket_cap_mb is None else float(bucket_cap_mb)
        if cap <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        params = [p for p in module.parameters() if p.requires_grad]
        self._check_same_module(params)
        self._sync_state(list(module.parameters()) + [b for b in module.buffers() if b is not None])
        self.__dict__["_reducer"] = _Reducer(self, params, cap * 2**20, find_unused_parameters)

    def _check_same_module(self, params: list) -> None:
        """Every rank must wrap the same architecture (PyTorch checks the parameter shapes too)."""
        from ember.distributed.collectives import all_gather_object

        mine = [(tuple(p.shape), p._data.dtype.name) for p in params]
        every = [None] * self.process_group.size()
        all_gather_object(every, mine, group=self.process_group)
        for r, theirs in enumerate(every):
            if theirs != mine:
                raise DistError(
                    f"DistributedDataParallel on rank {self.process_group.global_rank(self.process_group.rank())}: "
                    f"rank {self.process_group.global_rank(r)} wraps a module with other parameters ({len(theirs)} "
                    f"parameters) than this rank ({len(mine)}); every rank must build the same model")

    def _sync_state(self, tensors: list, graph: bool = False) -> None:
        """Copy rank 0's values of `tensors` to every rank: one broadcast per dtype."""
        from ember.distributed.collectives import broadcast

        by_dtype: dict = {}
        for t in tensors:
            by_dtype.setdefault(t._data.dtype, []).append(t)
        root = self.process_group.global_rank(0)
        with no_grad():
            for group in by_dtype.values():
                if graph:
                    from ember import ops

                    flat = ops.cat([t.reshape(-1) for t in group]) if len(group) > 1 else group[0].reshape(-1).clone()
                    broadcast(flat, src=root, group=self.process_group)
                    pos = 0
                    for t in group:
                        t.copy_(flat[pos:pos + t.numel()].reshape(t.shape))
                        pos += t.numel()
                    continue
                flat = np.concatenate([_host(t).reshape(-1) for t in group])
                pg = self.process_group
                seq = pg.enter()
                Work("broadcast (DistributedDataParallel)", pg.transport, pg.transport.ibcast(flat, 0),
                     members=pg.members, where=(pg, seq)).wait()
                pos = 0
                for t in group:
                    _write_data(t, flat[pos:pos + t.numel()])
                    pos += t.numel()

    def forward(self, *inputs, **kwargs):
        reducer = self._reducer
        if self.broadcast_buffers and self.require_forward_param_sync and self.process_group.size() > 1:
            buffers = [b for b in self.module.buffers() if b is not None]
            if buffers:
                self._sync_state(buffers, graph=is_tracing())
        if not is_tracing():
            reducer.check_finished()
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            reducer.prepare(out)
        else:
            reducer.expect = False
        return out

    def register_comm_hook(self, state, hook) -> None:
        """Reduce each gradient bucket with `hook(state, bucket)` instead of the allreduce (PyTorch's method).

        The hook gets a GradBucket and returns a Future whose value is the bucket's averaged buffer (the hook
        divides by the world size itself); see ember.distributed.algorithms.ddp_comm_hooks.default_hooks.
        """
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable (state, bucket) -> Future, got "
                            f"{type(hook).__name__}")
        if self._reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        self._reducer.comm_hook = (state, hook)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, forward/backward accumulate gradients locally; the first backward after it reduces them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self) -> str:
        return f"world_size={self.process_group.size()}, buckets={len(self._reducer.buckets)}"


def _write_data(t, values: np.ndarray) -> None:
    if type(t._data) is np.ndarray:
        np.copyto(t._data, values.reshape(t._data.shape), casting="unsafe")
    else:
        backend = t._device.backend
        backend.xp.copyto(t._data, backend.from_host(values.reshape(t.shape)))
    t._version[0] += 1
