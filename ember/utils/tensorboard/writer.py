"""`SummaryWriter`: torch.utils.tensorboard's interface, writing event files with the tensorboard
package's own `EventFileWriter` (asynchronous, flushed every `flush_secs`) and protobufs."""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ember.utils.tensorboard import summary as _summary


class FileWriter:
    """One event file in one folder: Events and Summaries added with a step and a wall time."""

    def __init__(self, log_dir, max_queue: int = 10, flush_secs: float = 120, filename_suffix: str = "") -> None:
        self.event_writer = EventFileWriter(os.fspath(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        """The folder of the event file."""
        return self.event_writer.get_logdir()

    def add_event(self, event: Event, step=None, walltime=None) -> None:
        """Stamp `event` with the wall time (now by default) and step, and queue it."""
        event.wall_time = time.time() if walltime is None else float(walltime)
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None) -> None:
        """Queue an Event holding `summary`."""
        self.add_event(Event(summary=summary), global_step, walltime)

    def flush(self) -> None:
        """Write the queued events to disk."""
        self.event_writer.flush()

    def close(self) -> None:
        """Flush and close the file."""
        self.event_writer.close()


def _check_tag(tag, what: str) -> str:
    if not isinstance(tag, str):
        raise TypeError(f"SummaryWriter.{what}: the tag must be a str, got {type(tag).__name__}")
    return tag


def _check_step(step, what: str):
    if step is None:
        return None
    try:
        return int(step)
    except (TypeError, ValueError):
        raise TypeError(f"SummaryWriter.{what}: global_step must be an int, got {step!r}") from None


class SummaryWriter:
    """Writes scalars, histograms, images, text, hparams and graphs to a TensorBoard log folder.

    Same constructor and methods as `torch.utils.tensorboard.SummaryWriter`: `log_dir` defaults to
    `runs/<Mon><DD>_<HH-MM-SS>_<host><comment>`; `purge_step` makes TensorBoard drop the events
    of an earlier run at and after that step (a run resumed from a checkpoint).
    """

    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: float = 120, filename_suffix: str = "") -> None:
        if not log_dir:
            log_dir = os.path.join("runs", datetime.now().strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname()
                                   + comment)
        self.log_dir = os.fspath(log_dir)
        if os.path.exists(self.log_dir) and not os.path.isdir(self.log_dir):
            raise NotADirectoryError(f"SummaryWriter: log_dir {self.log_dir} is a file, not a folder")
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()

    def _get_file_writer(self) -> FileWriter:
        """The main file writer (reopened after close, as in PyTorch)."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step = int(self.purge_step)
                self.file_writer.add_event(Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> str:
        """The folder events are written to."""
        return self.log_dir

    # --- values ---------------------------------------------------------------------------
    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log one number (a float, or a one-element tensor or array) at `global_step`."""
        s = _summary.scalar(_check_tag(tag, "add_scalar"), scalar_value, new_style, double_precision)
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_scalar"), walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None) -> None:
        """Log several numbers on one chart: each key goes to its own run `<log_dir>/<main_tag>_<key>`."""
        _check_tag(main_tag, "add_scalars")
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"SummaryWriter.add_scalars: expected a dict of tag -> value, got "
                            f"{type(tag_scalar_dict).__name__}")
        step = _check_step(global_step, "add_scalars")
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            fw_tag = logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(fw_tag)
            if fw is None:
                fw = self.all_writers[fw_tag] = FileWriter(fw_tag, self.max_queue, self.flush_secs,
                                                           self.filename_suffix)
            fw.add_summary(_summary.scalar(main_tag, value), step, walltime)

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None) -> None:
        """Log the histogram of `values` (TensorFlow's buckets by default, or any np.histogram `bins`)."""
        s = _summary.histogram(_check_tag(tag, "add_histogram"), values, bins, max_bins)
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_histogram"), walltime)

    def add_histogram_raw(self, tag: str, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,
                          global_step=None, walltime=None) -> None:
        """Log a histogram computed elsewhere: bucket_counts[i] values up to bucket_limits[i]."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError(f"SummaryWriter.add_histogram_raw({tag!r}): {len(bucket_limits)} bucket limits but "
                             f"{len(bucket_counts)} bucket counts")
        histo = _summary.HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                                        bucket_limit=list(bucket_limits), bucket=list(bucket_counts))
        s = _summary.Summary(value=[_summary.Summary.Value(tag=_check_tag(tag, "add_histogram_raw"), histo=histo)])
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_histogram_raw"), walltime)

    def add_figure(self, tag: str, figure, global_step=None, close: bool = True, walltime=None) -> None:
        """Log a matplotlib figure (or a list of them, as a grid) as an image."""
        figures = figure if isinstance(figure, list) else [figure]
        images = _summary.figures_to_chw(figures, close)
        if isinstance(figure, list):
            self.add_images(tag, images, global_step, walltime, dataformats="NCHW")
        else:
            self.add_image(tag, images[0], global_step, walltime, dataformats="CHW")

    def add_image(self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "CHW") -> None:
        """Log one image (floats in [0, 1] or uint8) as PNG."""
        s = _summary.image(_check_tag(tag, "add_image"), img_tensor, dataformats, "add_image")
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_image"), walltime)

    def add_images(self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "NCHW") -> None:
        """Log a batch of images tiled into one grid, 8 per row."""
        s = _summary.image(_check_tag(tag, "add_images"), img_tensor, dataformats, "add_images")
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_images"), walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        """Log a string (Markdown) for the text tab."""
        s = _summary.text(_check_tag(tag, "add_text"), text_string)
        self._get_file_writer().add_summary(s, _check_step(global_step, "add_text"), walltime)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None) -> None:
        """Log a run's hyperparameters and final metrics for the HPARAMS tab, in a sub-run `run_name`
        (default: the current time), with each metric also logged as a scalar there."""
        exp, start, end = _summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        step = _check_step(global_step, "add_hparams")
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w:
            for s in (exp, start, end):
                w.file_writer.add_summary(s, step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, step)

    def add_graph(self, model, input_to_model=None, verbose: bool = False, use_strict_trace: bool = True) -> None:
        """Trace `model(*input_to_model)` with ember.jit and log its graph for the graph tab."""
        from ember.utils.tensorboard.graph import graph_def

        gd = graph_def(model, input_to_model)
        if verbose:
            print(gd)
        self._get_file_writer().add_event(Event(graph_def=gd.SerializeToString()))

    # --- files ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Write everything queued to disk."""
        for w in (self.all_writers or {}).values():
            w.flush()

    def close(self) -> None:
        """Flush and close every file (a later add_* opens a new one)."""
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = self.all_writers = None

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
