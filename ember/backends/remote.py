"""Devices of other processes (`/job:ps/task:0`): graphs may place ops there, but nothing runs here.

Graph building needs only shape rules, and constants built for such a device keep their host data so
they can be shipped to the process that owns it. Running a kernel here is an error naming the device.
"""

from __future__ import annotations

import numpy as np

from ember.backends.base import Backend


class RemoteBackend(Backend):
    """Host copies for graph constants; kernels refuse to run (they run in the owning process)."""

    xp = np

    def from_host(self, array):
        return np.array(array, copy=True)

    def to_host(self, array):
        return np.asarray(array)

    def run(self, kernel, arrays, attrs):
        raise RuntimeError(
            f"{self.device} is a device of another process: ops placed there run in that process when a "
            "distributed graph runs (ember.v1 Session under `ember run`), never eagerly here")
