"""`tf.summary`: summary ops evaluated by Session.run, and FileWriter writing TensorBoard event files.

`scalar(name, x)` and `histogram(name, x)` are ops whose value, when a session runs them, is a
serialized `Summary` (bytes, as in TF); `merge`/`merge_all` concatenate them. `FileWriter.add_summary`
appends one to an event file (`ember.utils.event_file`), which TensorBoard reads. Each summary op is
added to the SUMMARIES collection; tags are prefixed by the name scope they are made in.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.graph import ir
from ember.op import Op, register
from ember.ops._rules import spec
from ember.tensor import Tensor
from ember.utils import event_file
from ember.v1.convert import convert_to_tensor
from ember.v1.graph_api import GraphKeys, get_default_graph

__all__ = ["FileWriter", "Summary", "histogram", "merge", "merge_all", "scalar", "summary_iterator"]

_BYTES = np.dtype(object)


def _as_bytes_array(data: bytes) -> np.ndarray:
    out = np.empty((), dtype=_BYTES)
    out[()] = data
    return out


class ScalarSummaryOp(Op):
    """A serialized Summary holding the (scalar) input under a tag."""

    name = "scalar_summary"
    differentiable = False

    def infer(self, x, tag):
        if tuple(x.shape) not in ((), (1,)) and None not in tuple(x.shape):
            raise ValueError(f"scalar summary {tag!r}: expected a scalar, got shape {tuple(x.shape)}")
        return spec((), _BYTES)

    def kernel(self, xp, x, tag):
        return _as_bytes_array(event_file.scalar_summary(tag, float(np.asarray(x).reshape(-1)[0])))


class HistogramSummaryOp(Op):
    """A serialized Summary holding the histogram of the input's values under a tag."""

    name = "histogram_summary"
    differentiable = False

    def infer(self, x, tag):
        return spec((), _BYTES)

    def kernel(self, xp, x, tag):
        return _as_bytes_array(event_file.histogram_summary(tag, np.asarray(x)))


class MergeSummaryOp(Op):
    """The serialized Summaries of the inputs as one (their values concatenated)."""

    name = "merge_summary"
    differentiable = False

    def infer(self, *summaries):
        return spec((), _BYTES)

    def kernel(self, xp, *summaries):
        return _as_bytes_array(b"".join(s[()] for s in summaries))


scalar_summary_op = register(ScalarSummaryOp())
histogram_summary_op = register(HistogramSummaryOp())
merge_summary_op = register(MergeSummaryOp())


def _tag(graph, name: str, family: str | None) -> str:
    tag = graph.prefixed(name)
    return f"{family}/{tag}" if family else tag


def _summary(op, name, tensor, collections, family) -> Tensor:
    graph = get_default_graph()
    x = convert_to_tensor(tensor)
    tag = _tag(graph, name, family)
    out = apply(op, x, tag=tag)
    graph.rename(out._data.node, graph.unique_name(tag))
    for key in collections if collections is not None else [GraphKeys.SUMMARIES]:
        graph.add_to_collection(key, out)
    return out


def scalar(name: str, tensor, collections=None, family: str | None = None) -> Tensor:
    """A summary op of a scalar (a float when logged); its value is a serialized Summary."""
    return _summary(scalar_summary_op, name, tensor, collections, family)


def histogram(name: str, values, collections=None, family: str | None = None) -> Tensor:
    """A summary op of the histogram of `values` (TensorFlow's buckets); its value is a serialized Summary."""
    return _summary(histogram_summary_op, name, values, collections, family)


def merge(inputs, collections=None, name: str | None = None) -> Tensor:
    """One summary op whose value holds every value of `inputs` (summary tensors)."""
    inputs = [convert_to_tensor(t) for t in inputs]
    if not inputs:
        raise ValueError("merge: no summaries to merge")
    graph = get_default_graph()
    out = apply(merge_summary_op, *inputs)
    graph.rename(out._data.node, graph.scoped_name(name or "Merge/MergeSummary"))
    for key in collections or ():
        graph.add_to_collection(key, out)
    return out


def merge_all(key: str = GraphKeys.SUMMARIES, scope: str | None = None, name: str | None = None):
    """All the summaries of the collection `key` merged into one op (None when there are none)."""
    summaries = get_default_graph().get_collection(key, scope)
    return merge(summaries, name=name) if summaries else None


class Summary:
    """TF's `Summary` message for values computed in Python: Summary(value=[Summary.Value(tag=..., simple_value=...)])."""

    class Value:
        """One tagged value of a Summary."""

        def __init__(self, tag: str = "", simple_value: float | None = None, node_name: str = "") -> None:
            self.tag = tag
            self.simple_value = simple_value
            self.node_name = node_name

    def __init__(self, value=None) -> None:
        self.value = list(value or [])

    def SerializeToString(self) -> bytes:  # noqa: N802  (protobuf's name)
        """The message in protobuf's wire format."""
        parts = []
        for v in self.value:
            if v.simple_value is None:
                raise ValueError(f"Summary.Value {v.tag!r}: only simple_value (a float) is supported")
            parts.append(event_file.scalar_summary(v.tag, v.simple_value))
        return b"".join(parts)


class FileWriter:
    """Writes summaries (and, with the tensorboard package, the graph) to an event file in `logdir`."""

    def __init__(self, logdir, graph=None, max_queue: int = 10, flush_secs: float = 120,
                 filename_suffix: str | None = None, session=None) -> None:
        self._logdir = logdir
        self._suffix = filename_suffix or ""
        self._writer = event_file.EventFileWriter(logdir, self._suffix)
        if graph is not None:
            self.add_graph(graph)

    def get_logdir(self) -> str:
        """The folder the event file is in."""
        return self._writer.logdir

    def add_summary(self, summary, global_step: int | None = None) -> None:
        """Append a summary (the bytes a summary op's run gave, or a Summary) at `global_step`."""
        if isinstance(summary, Summary):
            summary = summary.SerializeToString()
        elif isinstance(summary, np.ndarray) and summary.dtype == _BYTES:
            summary = summary[()]
        if not isinstance(summary, bytes):
            raise TypeError(f"add_summary: expected a serialized Summary (bytes), got {type(summary).__name__}")
        self._writer.add_summary(summary, 0 if global_step is None else int(global_step))
        self._writer.flush()

    def add_graph(self, graph, global_step: int | None = None) -> None:
        """Write `graph` (a Graph, or a Session's) as a GraphDef for TensorBoard's graph tab.

        The GraphDef is a protobuf built with the tensorboard package (extra `tensorboard`); without
        it, nothing is written, so TF1 programs that pass `sess.graph` run unchanged."""
        try:
            from ember.utils.tensorboard.graph import v1_graph_def
        except ImportError:
            return
        import time

        graph = getattr(graph, "graph", graph)  # a Session
        if not isinstance(graph, ir.Graph):
            raise TypeError(f"FileWriter.add_graph: expected an ember.v1 Graph, got {type(graph).__name__}")
        data = v1_graph_def(graph).SerializeToString()
        self._writer.add_event(event_file.event(time.time(), global_step or 0, graph_def=data))
        self._writer.flush()

    def flush(self) -> None:
        """Write buffered events to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()

    def reopen(self) -> None:
        """After close(): continue in a new event file in the same folder."""
        if self._writer.closed:
            self._writer = event_file.EventFileWriter(self._logdir, self._suffix)

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Event:
    """One event read back from an event file: wall_time, step, file_version, graph_def (bytes),
    summary.value[i].tag/simple_value."""

    def __init__(self, data: dict) -> None:
        self.wall_time = data.get("wall_time", 0.0)
        self.step = data.get("step", 0)
        self.file_version = data.get("file_version", "")
        self.graph_def = data.get("graph_def", b"")
        values = [_ReadValue(tag, v) for tag, v in data.get("summary", [])]
        self.summary = Summary(values)


class _ReadValue(Summary.Value):
    def __init__(self, tag: str, value) -> None:
        super().__init__(tag, value if isinstance(value, float) else 0.0)
        self.histo = value if isinstance(value, dict) else None


def summary_iterator(path):
    """The events of an event file, in order (`tf.train.summary_iterator`)."""
    for data in event_file.read_events(path):
        yield _Event(data)

