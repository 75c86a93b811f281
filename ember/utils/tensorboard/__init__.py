"""`ember.utils.tensorboard`: PyTorch's `SummaryWriter`, writing TensorBoard event files through the
`tensorboard` package (extra `tensorboard`); `add_graph` shows ember.jit graphs in the graph tab."""

from ember.utils.tensorboard._deps import require

require("tensorboard.summary.writer.event_file_writer")

from ember.utils.tensorboard.writer import SummaryWriter  # noqa: E402

__all__ = ["SummaryWriter"]
