"""Running a graph placed on several devices: one executor Plan and one worker thread per device.

`compile_plan` is what jit and Session use: a plain Plan when one device holds every value (no
cost for single-device graphs), else a `PlacedPlan`. A placed run binds one rendezvous, runs the
first device's part in the calling thread and each other part on a worker thread of its own
(borrowed from a pool of idle ones, so no part ever queues behind another), and waits for all. A
failure in any part aborts the rendezvous, so parts blocked in a recv stop at once, and the error
is raised naming the op, its node in the original graph and its device.
"""

from __future__ import annotations

import contextvars
import queue
import re
import threading

from ember.graph.executor import Plan, same_class_error
from ember.graph.placement import devices_of, partition
from ember.runtime.rendezvous import Cancelled, Rendezvous, bind

_NODE_REF = re.compile(r"\(node %(\d+)\)")


# Set by ember.v1.remote: process_plan(graph, outputs, extra_nodes) for graphs with devices of other
# processes (/job:ps/task:0), whose parts run there and whose send/recv pairs travel over MPI.
process_plan = [None]


def compile_plan(graph, outputs, extra_nodes=()):
    """The runnable form of (graph, outputs): a Plan when one device holds every value, else a PlacedPlan."""
    outputs = list(outputs)
    devices = devices_of(graph.needed_for(outputs + list(extra_nodes)))
    remote = sorted(str(d) for d in devices if d.job is not None)
    if remote:
        if process_plan[0] is None:
            raise RuntimeError(f"the graph places ops on {', '.join(remote)}: devices of other processes need "
                               "ember.distributed (run the program with ember run and create tf.train.Server)")
        return process_plan[0](graph, outputs, extra_nodes)
    if len(devices) > 1:
        return PlacedPlan(graph, outputs, extra_nodes)
    return Plan(graph, outputs, extra_nodes)


def part_plan(dev, part) -> Plan:
    """The executor Plan of one device's part (steps without outputs run on that device)."""
    plan = Plan(part.graph, part.outputs, part.graph.nodes)
    for step in plan.steps:
        if step.backend is None:  # nodes without outputs (signals, no_op) run on their part's device
            step.backend = dev.backend
    return plan


class PlacedPlan:
    """A graph whose nodes span devices: each device's part (see ember.graph.placement) runs on its own Plan."""

    def __init__(self, graph, outputs, extra_nodes=()) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        self.parts = partition(graph, self.outputs, extra_nodes)
        self.plans: dict = {dev: part_plan(dev, part) for dev, part in self.parts.items() if self.runs_here(dev)}

    def runs_here(self, dev) -> bool:
        """Whether this process runs `dev`'s part (all of them, except in a distributed plan)."""
        return True

    @property
    def steps(self) -> list:
        """Every part's steps, part after part."""
        return [s for plan in self.plans.values() for s in plan.steps]

    def __len__(self) -> int:
        return sum(len(p) for p in self.plans.values())

    def run(self, feeds: dict, *, memory: bool | None = None, parallel=None) -> list:
        """Run all parts at once with `feeds` (original placeholder Value -> array); returns the output arrays.

        Each part runs plainly and in order on its thread (`memory` and `parallel` do not apply): an
        array handed to a send must stay untouched until the receiving device has copied it, which
        arena reuse would break, and the send/recv kernels find the rendezvous through their thread.
        """
        results = self.run_parts(Rendezvous(), feeds)
        out: list = [None] * len(self.outputs)
        for dev, arrays in results.items():
            for i, a in zip(self.parts[dev].out_index, arrays):
                out[i] = a
        return out

    def run_parts(self, rv: Rendezvous, feeds: dict) -> dict:
        """Run this process's parts at once, meeting in `rv`; device -> output arrays of its part."""
        results: dict = {}
        errors: list = []

        def work(dev) -> None:
            part = self.parts[dev]
            part_feeds = {pv: feeds[v] for v, pv in part.feeds.items() if v in feeds}
            try:
                with bind(rv):
                    results[dev] = self.plans[dev].run(part_feeds, memory=False, parallel=False)
            except BaseException as e:  # noqa: BLE001 - raised by run() once every part has stopped
                errors.append((dev, e))
                rv.abort(e)

        devices = list(self.plans)
        if not devices:  # a distributed plan whose parts all run in other processes
            return results
        done = [_borrow().submit(work, d) for d in devices[1:]]
        try:
            work(devices[0])
            for d in done:
                d.wait()
        except BaseException as e:  # interrupted while waiting: stop the other parts too
            rv.abort(e)
            raise
        if errors:
            self._raise(errors)
        return results

    def _raise(self, errors: list):
        """Raise the error that stopped the run (not the cancellations it caused), naming the original node."""
        causes = [(d, e) for d, e in errors if not isinstance(e.__cause__ or e, Cancelled)]
        dev, e = (causes or errors)[0]
        if e.__cause__ is not None and _NODE_REF.search(str(e)):  # a kernel's error, as the executor raised it
            part = self.parts[dev]

            def original(m) -> str:
                node = part.origin.get(int(m.group(1)))
                return f"(node %{node.id} on {dev})" if node is not None else f"{m.group(0)} on {dev}"

            err = same_class_error(e, _NODE_REF.sub(original, str(e), count=1))
            step_node = getattr(e, "node", None)
            err.node = part.origin.get(step_node.id, step_node) if step_node is not None else None
            raise err from e.__cause__
        raise e


# --- worker threads ------------------------------------------------------------------------------
class _Worker:
    """A reusable daemon thread; a placed run borrows one per extra device for the whole run."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="ember-placement", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job, arg, done, ctx = self._jobs.get()
            try:
                ctx.run(job, arg)
            finally:
                with _idle_lock:
                    _idle.append(self)  # back in the pool first: the run may borrow again once `done` is set
                done.set()

    def submit(self, job, arg) -> threading.Event:
        """Run job(arg) on this thread, in a copy of the caller's context (so a part sees what the run bound,
        such as a session's variable values); the event is set when it has returned."""
        done = threading.Event()
        self._jobs.put((job, arg, done, contextvars.copy_context()))
        return done


_idle: list = []
_idle_lock = threading.Lock()


def _borrow() -> _Worker:
    """An idle worker, or a new one: a part never waits behind another run's part (that could deadlock)."""
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return _Worker()
