"""`Summary` protocol buffers for scalars, histograms, images, text and hparams, built with the
`tensorboard` package's protobufs exactly as `torch.utils.tensorboard.summary` builds them."""

from __future__ import annotations

import io
import numbers

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto


def to_numpy(x, what: str) -> np.ndarray:
    """A NumPy copy-free view of a Tensor, array, number or list (low-precision floats as float32)."""
    from ember.tensor import Tensor

    if isinstance(x, Tensor):
        if x.is_meta:
            raise ValueError(f"SummaryWriter.{what}: a meta tensor has no values to log (shape {tuple(x.shape)})")
        x = x.detach().cpu().numpy()
    elif hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"SummaryWriter.{what}: can't read {type(x).__name__} as numbers: {e}") from None
    if arr.dtype.kind not in "biuf":
        if arr.dtype.name == "bfloat16":
            return arr.astype(np.float32)
        raise TypeError(f"SummaryWriter.{what}: expected numbers, got an array of dtype {arr.dtype}")
    return arr


def scalar(tag: str, value, new_style: bool = False, double_precision: bool = False) -> Summary:
    """A Summary with one scalar (`simple_value`, or a scalars-plugin tensor with new_style)."""
    arr = to_numpy(value, "add_scalar").squeeze()
    if arr.ndim != 0:
        raise ValueError(f"SummaryWriter.add_scalar({tag!r}): expected one value, got shape {arr.shape}")
    v = float(arr)
    if new_style:
        proto = (TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision
                 else TensorProto(float_val=[v], dtype="DT_FLOAT"))
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        return Summary(value=[Summary.Value(tag=tag, tensor=proto, metadata=meta)])
    return Summary(value=[Summary.Value(tag=tag, simple_value=v)])


def default_bins() -> list:
    """TensorFlow's histogram bucket edges: +-1e-12 growing by 10% up to +-1e20, and 0."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-b for b in reversed(pos)] + [0] + pos


_TF_BINS = None


def histogram(tag: str, values, bins="tensorflow", max_bins: int | None = None) -> Summary:
    """A Summary with the histogram of `values` (np.histogram's `bins`, or TensorFlow's edges)."""
    global _TF_BINS
    if isinstance(bins, str) and bins == "tensorflow":
        if _TF_BINS is None:
            _TF_BINS = default_bins()
        bins = _TF_BINS
    v = to_numpy(values, "add_histogram").astype(float).reshape(-1)
    if v.size == 0:
        raise ValueError(f"SummaryWriter.add_histogram({tag!r}): the values are empty")
    counts, limits = np.histogram(v, bins=bins)
    if max_bins is not None and len(counts) > max_bins:  # merge neighbouring buckets, as PyTorch does
        k = len(counts) // max_bins
        if len(counts) % k:
            counts = np.pad(counts, [(0, k - len(counts) % k)])
        counts = counts.reshape(-1, k).sum(axis=-1)
        limits = np.concatenate([limits[:-1:k], limits[-1:]])
    # Keep the buckets from the first to the last non-empty one, with one empty bucket before them
    # (TensorBoard reads each count as the bucket ending at its limit).
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:  # every value fell outside the edges
        raise ValueError(f"SummaryWriter.add_histogram({tag!r}): no value lies inside the bins "
                         f"[{limits[0]:g}, {limits[-1]:g}]")
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    histo = HistogramProto(min=v.min(), max=v.max(), num=len(v), sum=v.sum(), sum_squares=v.dot(v),
                           bucket_limit=limits.tolist(), bucket=counts.tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


def _grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """N images (NCHW, 1 or 3 channels) tiled on a CHW canvas, 8 per row (PyTorch's layout)."""
    if images.shape[1] == 1:
        images = np.concatenate([images] * 3, 1)
    if images.shape[1] not in (3, 4):
        raise ValueError(f"SummaryWriter.add_images: expected 1, 3 or 4 channels, got shape {images.shape}")
    n, c, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((c, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = images[i]
    return canvas


def to_hwc(arr: np.ndarray, dataformats: str, what: str) -> np.ndarray:
    """An image array in `dataformats` (CHW, HWC, HW, NCHW, NHWC, ...) as HWC with 3 or 4 channels."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW") or not {"H", "W"} <= set(fmt):
        raise ValueError(f"SummaryWriter.{what}: bad dataformats {dataformats!r} (e.g. 'CHW', 'HWC', 'NCHW')")
    if arr.ndim != len(fmt):
        raise ValueError(f"SummaryWriter.{what}: an image of shape {arr.shape} does not match "
                         f"dataformats {dataformats!r}")
    if len(fmt) == 4:
        return _grid(arr.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        if "N" in fmt:
            raise ValueError(f"SummaryWriter.{what}: dataformats {dataformats!r} with 3 letters must be CHW or HWC")
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        if hwc.shape[2] == 1:
            hwc = np.concatenate([hwc] * 3, 2)
        if hwc.shape[2] not in (3, 4):
            raise ValueError(f"SummaryWriter.{what}: expected 1, 3 or 4 channels, got shape {arr.shape} "
                             f"as {dataformats!r}")
        return hwc
    hw = arr.transpose([fmt.find(c) for c in "HW"])
    return np.stack([hw] * 3, 2)


def image(tag: str, img, dataformats: str = "CHW", what: str = "add_image") -> Summary:
    """A Summary with one PNG image; floats are read in [0, 1], uint8 in [0, 255]."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError('SummaryWriter.add_image needs Pillow to encode PNG: pip install "ember[tensorboard]"') \
            from None
    arr = to_hwc(to_numpy(img, what), dataformats, what)
    scale = 1 if arr.dtype == np.uint8 else 255
    arr = (arr.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    h, w, c = arr.shape
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    img_proto = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buf.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=img_proto)])


def figures_to_chw(figures: list, close: bool = True) -> np.ndarray:
    """Matplotlib figures rendered to uint8 RGB images, stacked as NCHW (all must be the same size)."""
    out = []
    for fig in figures:
        if not hasattr(fig, "canvas"):
            raise TypeError(f"SummaryWriter.add_figure: expected a matplotlib Figure, got {type(fig).__name__}")
        fig.canvas.draw()
        rgba = np.asarray(fig.canvas.buffer_rgba())
        out.append(rgba[..., :3].transpose(2, 0, 1).copy())
        if close:
            import matplotlib.pyplot as plt

            plt.close(fig)
    if len({im.shape for im in out}) > 1:
        raise ValueError(f"SummaryWriter.add_figure: the figures differ in size: {[im.shape for im in out]}")
    return np.stack(out)


def text(tag: str, text_string: str) -> Summary:
    """A Summary for the text plugin (tag `<tag>/text_summary`, as PyTorch writes it)."""
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
    proto = TensorProto(dtype="DT_STRING", string_val=[str(text_string).encode("utf_8")],
                        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta, tensor=proto)])


def _hparam_summary(tag: str, **content) -> Summary:
    from tensorboard.plugins.hparams.metadata import PLUGIN_DATA_VERSION, PLUGIN_NAME
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    data = HParamsPluginData(version=PLUGIN_DATA_VERSION, **content)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME,
                                                                  content=data.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def hparams(hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None) -> tuple:
    """The experiment, session-start and session-end Summaries of the hparams plugin."""
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.plugin_data_pb2 import SessionEndInfo, SessionStartInfo

    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError(f"SummaryWriter.add_hparams: hparam_dict and metric_dict must be dicts, got "
                        f"{type(hparam_dict).__name__} and {type(metric_dict).__name__}")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("SummaryWriter.add_hparams: hparam_domain_discrete must be a dict of lists")
    for k, v in domains.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"SummaryWriter.add_hparams: hparam_domain_discrete[{k!r}] must be a list of values "
                            f"of the type of hparam_dict[{k!r}]")
    infos, start = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, bool):  # before numbers: a bool is an int
            start.hparams[k].bool_value, kind, field = v, "DATA_TYPE_BOOL", "bool_value"
        elif isinstance(v, str):
            start.hparams[k].string_value, kind, field = v, "DATA_TYPE_STRING", "string_value"
        elif isinstance(v, numbers.Real) or hasattr(v, "shape"):
            num = float(to_numpy(v, "add_hparams").reshape(-1)[0])
            start.hparams[k].number_value, kind, field = num, "DATA_TYPE_FLOAT64", "number_value"
        else:
            raise ValueError(f"SummaryWriter.add_hparams: hparam {k!r} is a {type(v).__name__}; "
                             "expected int, float, str, bool or a one-element tensor")
        domain = None
        if k in domains:
            domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in domains[k]])
        infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=domain))
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (_hparam_summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            _hparam_summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            _hparam_summary(metadata.SESSION_END_INFO_TAG,
                            session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))))
