"""Device names (`cpu`, `cpu:N`, `meta`, `cuda:N`, and `/job:J/task:T[/cpu:N]` for another process's
devices in a distributed graph) and the current-device scope."""

from __future__ import annotations

import threading

_KNOWN_TYPES = ("cpu", "meta", "cuda")


class Device:
    """A place where tensors live. Interned: equal devices are the same object."""

    __slots__ = ("type", "index", "job", "task", "_name", "_backend")
    _cache: dict = {}

    def __new__(cls, spec="cpu", index: int | None = None) -> Device:
        if isinstance(spec, Device):
            return spec
        key = (spec, index)
        dev = cls._cache.get(key)
        if dev is not None:
            return dev
        dev = cls._parse(spec, index)
        cls._cache[key] = dev
        return dev

    @classmethod
    def _parse(cls, spec, index):
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        job = task = None
        if spec.strip().startswith("/job:"):
            job, task, spec = _parse_job(spec.strip())
        type_, _, idx = spec.strip().partition(":")
        if type_ not in _KNOWN_TYPES:
            raise ValueError(f"unknown device {spec!r}: expected one of cpu, cpu:N, meta, cuda, cuda:N")
        if idx:
            if index is not None:
                raise ValueError(f"device {spec!r} already has an index; got index={index} too")
            if not idx.isdigit():
                raise ValueError(f"bad device index in {spec!r}: expected a non-negative integer")
            index = int(idx)
        if type_ == "meta" and index not in (None, 0):
            raise ValueError(f"the meta device has no index, got {spec!r}")
        index = index or 0
        canonical = (type_, index, job, task)
        for existing in cls._cache.values():
            if (existing.type, existing.index, existing.job, existing.task) == canonical:
                return existing
        dev = object.__new__(cls)
        dev.type = type_
        dev.index = index
        dev.job = job
        dev.task = task
        if type_ == "cuda":
            dev._name = f"cuda:{index}"
        else:
            dev._name = type_ if index == 0 else f"{type_}:{index}"
        if job is not None:  # a device of another process: /job:ps/task:0, /job:worker/task:1/cpu:1
            dev._name = f"/job:{job}/task:{task}" + ("" if (type_, index) == ("cpu", 0) else f"/{dev._name}")
        dev._backend = None
        return dev

    @property
    def backend(self):
        """The backend (array module and memory) that runs this device's kernels."""
        if self._backend is None:
            from ember.backends import backend_for

            self._backend = backend_for(self)
        return self._backend

    def __repr__(self) -> str:
        if self.job is not None:
            return f"device('{self._name}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self._name

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except (ValueError, TypeError):
                return False
        return self is other

    def __hash__(self) -> int:
        return hash(self._name)

    def __reduce__(self):
        return (Device, (self._name,))

    # `with em.device("cpu:1"):` sets the default device for new tensors in this thread.
    def __enter__(self) -> Device:
        stack = _scope_stack()
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _scope_stack().pop()


def _parse_job(spec: str) -> tuple:
    """('ps', 0, 'cpu:0') from '/job:ps/task:0', '/job:ps/replica:0/task:0/device:CPU:0', '/job:ps/task:0/gpu:1'."""
    job, task, local = None, 0, "cpu"
    for field in spec.strip("/").split("/"):
        name, _, value = field.partition(":")
        if name == "job" and value:
            job = value
        elif name == "task" and value.isdigit():
            task = int(value)
        elif name == "replica":
            continue
        elif name.lower() in ("device", "cpu", "gpu", "cuda"):
            local = (value if name.lower() == "device" else field).lower().replace("gpu", "cuda")
        else:
            raise ValueError(f"bad device name {spec!r}: expected /job:NAME/task:N[/cpu:N] (or /device:CPU:N)")
    if job is None:
        raise ValueError(f"bad device name {spec!r}: no job name")
    return job, task, local


_local = threading.local()


def _scope_stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


_GLOBAL_DEFAULT: list = []  # set_default_device's device, when one was set (else cpu)


def default_device() -> Device:
    """The device new tensors are created on: the innermost `with device(...)` scope, else set_default_device's
    device, else cpu."""
    stack = getattr(_local, "stack", None)
    if stack:
        return stack[-1]
    return _GLOBAL_DEFAULT[0] if _GLOBAL_DEFAULT else CPU


def set_default_device(device) -> None:
    """Create tensors on `device` when no device is given (None: back to cpu), as torch.set_default_device; a
    `with device(...)` scope still wins inside it."""
    _GLOBAL_DEFAULT.clear()
    if device is not None:
        _GLOBAL_DEFAULT.append(device if type(device) is Device else Device(device))


def get_default_device() -> Device:
    """The device tensors are created on when none is given."""
    return default_device()


def scope_depth() -> int:
    """How many `with device(...)` scopes are open in this thread."""
    stack = getattr(_local, "stack", None)
    return len(stack) if stack else 0


def scope_device(base: int = 0) -> Device | None:
    """The innermost `with device(...)` scope opened above depth `base` in this thread, else None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack and len(stack) > base else None


def as_device(device) -> Device:
    """Normalise None / str / Device to a Device (None means the default device)."""
    if device is None:
        return default_device()
    if type(device) is Device:
        return device
    return Device(device)


CPU = Device("cpu")
META = Device("meta")
