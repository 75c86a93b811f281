"""Variable-length sequences for the recurrent layers, as torch.nn.utils.rnn: pad, pack and unpack.

A PackedSequence holds the time steps of a batch of sequences sorted by length, longest first, one
time step after another: `data` has the rows of time step 0 (every sequence), then those of step 1
(the sequences longer than 1), and so on; `batch_sizes[t]` counts the rows of step t. nn.LSTM, nn.GRU
and nn.RNN run such a batch without computing past each sequence's end. Every function here moves
rows with one gather (`index_select`) whose positions are computed from the lengths with NumPy, so
gradients flow back to the padded input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ember import creation, dtypes, ops
from ember.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """A batch of sequences packed by pack_padded_sequence or pack_sequence (see the module docstring).

    `sorted_indices[j]` is the batch position of the j-th longest sequence (None when the batch was
    already sorted); `unsorted_indices` is its inverse. `batch_sizes` is an int64 tensor on the CPU.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:  # PyTorch also accepts one (data, batch_sizes) pair
            data, batch_sizes = data[0], data[1]
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if not isinstance(batch_sizes, Tensor) or batch_sizes.ndim != 1 or batch_sizes.dtype != dtypes.int64 \
                or batch_sizes.device.type != "cpu":
            raise TypeError("PackedSequence: batch_sizes should always be a 1-D int64 tensor on the CPU, got "
                            f"{_describe(batch_sizes)}")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """`data` converted as Tensor.to(...) converts it; the indices follow it to its device, batch_sizes stays."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        sorted_indices = None if self.sorted_indices is None else self.sorted_indices.to(device)
        unsorted_indices = None if self.unsorted_indices is None else self.unsorted_indices.to(device)
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cpu(self) -> PackedSequence:
        """The sequence with its data on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None) -> PackedSequence:
        """The sequence with its data on a CUDA device."""
        return self.to("cuda" if device is None else device)

    def double(self) -> PackedSequence:
        """`data` as float64."""
        return self.to(dtypes.float64)

    def float(self) -> PackedSequence:
        """`data` as float32."""
        return self.to(dtypes.float32)

    def half(self) -> PackedSequence:
        """`data` as float16."""
        return self.to(dtypes.float16)

    def long(self) -> PackedSequence:
        """`data` as int64."""
        return self.to(dtypes.int64)

    def int(self) -> PackedSequence:
        """`data` as int32."""
        return self.to(dtypes.int32)

    def short(self) -> PackedSequence:
        """`data` as int16."""
        return self.to(dtypes.int16)

    def byte(self) -> PackedSequence:
        """`data` as uint8."""
        return self.to(dtypes.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether `data` is on a CUDA device."""
        return self.data.device.type == "cuda"

    def is_pinned(self) -> bool:
        """Always False: Ember has no pinned host memory."""
        return False


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f"a {value.ndim}-D {value.dtype.name} tensor on {value.device}"
    return type(value).__name__


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of 0..n-1 (None for None)."""
    if permutation is None:
        return None
    order = np.asarray(permutation.numpy() if permutation.device.type == "cpu" else permutation.cpu().numpy())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order), dtype=order.dtype)
    return creation.tensor(inverse, device=permutation.device)


def _lengths(lengths, op: str) -> np.ndarray:
    """The lengths as a 1-D int64 array: from a list, a NumPy array or a 1-D CPU tensor, as PyTorch takes them."""
    if isinstance(lengths, Tensor):
        if lengths.device.type != "cpu" or lengths.ndim != 1:
            raise RuntimeError(f"{op}: 'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{_describe(lengths)}")
        return lengths.numpy().astype(np.int64)
    array = np.asarray(lengths)
    if array.ndim != 1 or array.dtype.kind not in "iuf":  # PyTorch casts float lengths to int64 too
        raise RuntimeError(f"{op}: 'lengths' should be a 1-D list of ints or a 1-D CPU int64 tensor, got a "
                           f"{array.ndim}-D {array.dtype} array")
    return array.astype(np.int64)


def _batch_sizes(sorted_lengths: np.ndarray) -> np.ndarray:
    """How many sequences (sorted by length, longest first) have a step t, for every t."""
    steps = np.arange(int(sorted_lengths[0]))
    return (sorted_lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def _offsets(batch_sizes: np.ndarray) -> np.ndarray:
    """The first row of each time step in a packed `data`."""
    return np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).astype(np.int64)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences with the given lengths.

    With enforce_sorted=True the lengths must be non-increasing; otherwise the batch is sorted here
    (longest first, ties in batch order) and `sorted_indices` records how.
    """
    op = "pack_padded_sequence"
    lengths = _lengths(lengths, op)
    if input.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dimensions (time and batch), got shape "
                         f"{tuple(input.shape)}")
    batch_dim = 0 if batch_first else 1
    steps, batch = int(input.shape[1 - batch_dim]), int(input.shape[batch_dim])
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch})")
    if batch == 0 or lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if lengths.max() > steps:
        raise ValueError(f"{op}: a length of {int(lengths.max())} is more than the input's {steps} time steps "
                         f"(input shape {tuple(input.shape)}, batch_first={batch_first})")
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = np.arange(batch), None
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_indices = creation.tensor(order.astype(np.int64), device=input.device)
    batch_sizes = _batch_sizes(lengths[order])
    t = np.repeat(np.arange(len(batch_sizes)), batch_sizes)  # each packed row's time step ...
    j = np.concatenate([np.arange(b) for b in batch_sizes])  # ... and its place among the sorted sequences
    b = order[j]
    rows = b * steps + t if batch_first else t * batch + b
    flat = input.reshape((steps * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, creation.tensor(rows.astype(np.int64), device=input.device))
    return PackedSequence(data, creation.tensor(batch_sizes), sorted_indices, invert_permutation(sorted_indices))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo pack_padded_sequence: (the padded batch in the original order, the lengths as an int64 CPU tensor).

    `total_length` pads the time axis to that many steps (to undo a padding longer than the longest sequence).
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    data, batch_sizes, _, unsorted_indices = sequence
    sizes = batch_sizes.numpy().astype(np.int64)
    max_length = len(sizes)
    if total_length is not None:
        if total_length < max_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {max_length}")
        max_length = int(total_length)
    batch = int(sizes[0])
    sorted_lengths = (sizes[None, :] > np.arange(batch)[:, None]).sum(axis=1)  # each sorted sequence's length
    place = np.arange(batch) if unsorted_indices is None else _host(unsorted_indices)  # batch position -> sorted
    lengths = sorted_lengths[place]
    t = np.arange(max_length)[:, None]
    # (T, B): the packed row of each step of each sequence, or one past the end (the padding row) after its end
    rows = np.where(t < lengths[None, :], _offsets(sizes)[np.minimum(t, len(sizes) - 1)] + place[None, :],
                    len(data))
    if batch_first:
        rows = rows.T
    pad = creation.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = ops.cat([data, pad], 0).index_select(0, creation.tensor(rows.reshape(-1), device=data.device))
    padded = padded.reshape(rows.shape + tuple(data.shape[1:]))
    return padded, creation.tensor(lengths.astype(np.int64))


def _host(indices: Tensor) -> np.ndarray:
    return (indices if indices.device.type == "cpu" else indices.cpu()).numpy().astype(np.int64)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes (L_i, *) into one (T, B, *) batch (or (B, T, *)), padding to the longest."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.ndim < 1:
            raise TypeError(f"pad_sequence: sequence {i} is {_describe(s)}; expected tensors of shape (L, *)")
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: sequence {i} has shape {tuple(s.shape)}, but sequence 0 has "
                               f"{tuple(sequences[0].shape)}; all must agree after the first (time) dimension")
    lengths = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    steps, total = int(lengths.max()), int(lengths.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    t = np.arange(steps)[None, :]
    first = (steps - lengths if padding_side == "left" else np.zeros_like(lengths))[:, None]  # where data begins
    inside = (t >= first) & (t < first + lengths[:, None])
    rows = np.where(inside, starts[:, None] + t - first, total)  # (B, T)
    if not batch_first:
        rows = rows.T
    s0 = sequences[0]
    pad = creation.full((1,) + trailing, padding_value, dtype=s0.dtype, device=s0.device)
    stacked = ops.cat([*sequences, pad], 0).index_select(0, creation.tensor(rows.reshape(-1), device=s0.device))
    return stacked.reshape(rows.shape + trailing)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """The sequences of a padded batch, each cut to its length (the inverse of pad_sequence)."""
    lengths = _lengths(lengths, "unpad_sequence")
    batch = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    if len(lengths) != batch.shape[0]:
        raise ValueError(f"unpad_sequence: {len(lengths)} lengths for a batch of {batch.shape[0]} sequences")
    return [batch[i, :int(n)] for i, n in enumerate(lengths)]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shapes (L_i, *): pad_sequence, then pack_padded_sequence."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a PackedSequence holds, in their original order (the inverse of pack_sequence)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
