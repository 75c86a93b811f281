"""MNIST, Fashion-MNIST and CIFAR-10 read from synthetic files in their standard formats."""

import gzip
import os
import threading
import tracemalloc
import zlib

import numpy as np
import pytest

import ember as em
from ember import config
from ember.data import DataLoader
from ember.data.transforms import ToTensor
from ember.datasets import (
    CIFAR10,
    MNIST,
    FashionMNIST,
    default_root,
    read_cifar_binary,
    read_idx,
    write_cifar_binary,
    write_idx,
)


# --- IDX ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
def test_idx_round_trip(tmp_path, dtype, name):
    arr = (np.arange(60).reshape(3, 4, 5) - 20).astype(dtype)
    write_idx(tmp_path / name, arr)
    back = read_idx(tmp_path / name)
    assert back.dtype == arr.dtype and back.shape == arr.shape and np.array_equal(back, arr)


def test_idx_header_is_the_standard_one(tmp_path):
    write_idx(tmp_path / "l", np.array([7, 2, 1], np.uint8))
    assert (tmp_path / "l").read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1])
    write_idx(tmp_path / "l.gz", np.array([7, 2, 1], np.uint8))
    assert gzip.decompress((tmp_path / "l.gz").read_bytes()) == (tmp_path / "l").read_bytes()


@pytest.mark.parametrize("data,problem", [
    (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "not an IDX file"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "unknown type code"),
    (b"\x00\x00\x08\x02\x00\x00", "truncated IDX header"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x04\x05", "truncated"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x01\x05\x06", "trailing bytes"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
])
def test_idx_corrupt_files_name_the_file(tmp_path, data, problem):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=problem) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def _gzip_stream(head: bytes, zeros: int) -> bytes:
    """A gzip file of `head` followed by `zeros` zero bytes, compressed a megabyte at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    out = [z.compress(head)]
    chunk = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(z.compress(chunk))
    return b"".join(out) + z.compress(bytes(zeros % (1 << 20))) + z.flush()


def _peak_bytes_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("head,problem", [
    (b"\x01\x00\x08\x01\x00\x00\x00\x10", "not an IDX file"),  # bad magic, then 200 MB of zeros
    (b"\x00\x00\x07\x01\x00\x00\x00\x10", "unknown type code"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x10", "trailing bytes"),  # declares 16 bytes, holds 200 MB
])
def test_gzipped_idx_is_decompressed_no_further_than_its_header_declares(tmp_path, head, problem):
    path = tmp_path / "bomb-idx1-ubyte.gz"
    path.write_bytes(_gzip_stream(head, 200 << 20))
    assert path.stat().st_size < 1 << 20

    def read():
        with pytest.raises(ValueError, match=problem) as info:
            read_idx(path)
        assert str(path) in str(info.value)

    assert _peak_bytes_of(read) < 8 << 20


def test_gzipped_idx_declaring_more_than_it_can_hold_is_refused_before_reading(tmp_path):
    path = tmp_path / "short-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(bytes([0, 0, 8, 3]) + np.array([60000, 280, 280], ">u4").tobytes() + b"\x05" * 10))
    peak = _peak_bytes_of(lambda: pytest.raises(ValueError, read_idx, path).match("truncated"))
    assert peak < 1 << 20  # the 4.7 GB it declares are never allocated


@pytest.mark.parametrize("extra,problem", [(-1, "truncated"), (1, "has trailing bytes")])
def test_gzipped_idx_shorter_or_longer_than_declared_names_the_file(tmp_path, extra, problem):
    arr = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    write_idx(tmp_path / "ok.gz", arr)
    raw = gzip.decompress((tmp_path / "ok.gz").read_bytes())
    path = tmp_path / "bad-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(raw[:extra] if extra < 0 else raw + b"\x00" * extra))
    with pytest.raises(ValueError, match=rf"{path}: IDX file {problem}: shape \(2, 3, 4\) of int16 needs 64 bytes"):
        read_idx(path)


def test_idx_read_from_a_pipe(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs named pipes")
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_idx(tmp_path / "a.gz", arr)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = (tmp_path / "a.gz").read_bytes()
    writer = threading.Thread(target=lambda: fifo.write_bytes(data))
    writer.start()
    back = read_idx(fifo)
    writer.join()
    assert back.dtype == np.float32 and np.array_equal(back, arr)


def test_write_idx_rejects_unsupported_dtype(tmp_path):
    with pytest.raises(TypeError, match="IDX"):
        write_idx(tmp_path / "x", np.zeros(2, np.int64))


# --- MNIST ---------------------------------------------------------------------------------------------
def _write_mnist(folder, n_train=12, n_test=5, gz=True, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        ext = ".gz" if gz else ""
        write_idx(folder / f"{prefix}-images-idx3-ubyte{ext}", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{ext}", labels)
        out[prefix] = (images, labels)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reads_train_and_test(tmp_path, gz):
    ref = _write_mnist(tmp_path, gz=gz)
    train, test = MNIST(tmp_path), MNIST(tmp_path, train=False)
    assert len(train) == 12 and len(test) == 5
    img, label = train[3]
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (28, 28)
    assert isinstance(label, int) and label == ref["train"][1][3]
    np.testing.assert_array_equal(img, ref["train"][0][3])
    assert train.data.dtype == em.uint8 and tuple(train.data.shape) == (12, 28, 28)
    assert train.targets.dtype == em.int64 and train.targets.tolist() == ref["train"][1].tolist()
    np.testing.assert_array_equal(test.data.numpy(), ref["t10k"][0])


def test_mnist_transforms_and_loader(tmp_path):
    _write_mnist(tmp_path)
    ds = MNIST(tmp_path, transform=ToTensor(), target_transform=lambda y: y + 100)
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert tuple(x.shape) == (4, 1, 28, 28) and x.dtype == em.float32 and x.max().item() <= 1.0
    assert (y >= 100).all().item()


def test_mnist_default_root_from_env_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path / "store"))
    _write_mnist(tmp_path / "store" / "mnist", n_train=3)
    assert default_root("mnist") == tmp_path / "store" / "mnist"
    assert len(MNIST()) == 3
    monkeypatch.delenv("EMBER_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config.reset("data")  # settings are read once, on first use
    assert default_root("mnist") == tmp_path / "home" / ".ember" / "data" / "mnist"
    _write_mnist(tmp_path / "home" / ".ember" / "data" / "mnist", n_train=4)
    assert len(MNIST()) == 4


def test_mnist_accepts_torchvision_layout(tmp_path):
    _write_mnist(tmp_path / "MNIST" / "raw", n_train=2)
    assert len(MNIST(tmp_path)) == 2


def test_missing_files_error_lists_files_and_folder(tmp_path):
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(FileNotFoundError) as info:
        MNIST(tmp_path)
    msg = str(info.value)
    assert "train-labels-idx1-ubyte" in msg and "train-images" not in msg
    assert str(tmp_path) in msg and "EMBER_DATA" in msg and "root=" in msg
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte.*t10k-labels-idx1-ubyte"):
        MNIST(tmp_path, train=False)


def test_mnist_label_count_mismatch(tmp_path):
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="labels"):
        MNIST(tmp_path)


def test_fashion_mnist(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path))
    _write_mnist(tmp_path / "fashion-mnist", n_train=6)
    ds = FashionMNIST()
    assert len(ds) == 6 and ds.classes[9] == "Ankle boot"
    with pytest.raises(FileNotFoundError, match="FashionMNIST.*fashion-mnist"):
        FashionMNIST(train=False, root=tmp_path / "nowhere" / "fashion-mnist")


# --- CIFAR-10 ---------------------------------------------------------------------------------------
def test_cifar_record_layout(tmp_path):
    rec = np.zeros(3073, np.uint8)
    rec[0] = 6
    rec[1 + 0 * 1024 + 1 * 32 + 2] = 10  # red plane, row 1, column 2
    rec[1 + 1 * 1024 + 1 * 32 + 2] = 20  # green
    rec[1 + 2 * 1024 + 1 * 32 + 2] = 30  # blue
    path = tmp_path / "one.bin"
    rec.tofile(path)
    images, labels = read_cifar_binary(path)
    assert images.shape == (1, 32, 32, 3) and labels.tolist() == [6]
    assert images[0, 1, 2].tolist() == [10, 20, 30] and images.sum() == 60


def test_cifar_binary_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 4)
    write_cifar_binary(tmp_path / "b.bin", images, labels)
    assert os.path.getsize(tmp_path / "b.bin") == 4 * 3073
    back, back_labels = read_cifar_binary(tmp_path / "b.bin")
    np.testing.assert_array_equal(back, images)
    assert back_labels.tolist() == labels.tolist()


def _write_cifar(root, per_file=3):
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    written = {}
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        imgs = rng.integers(0, 256, (per_file, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, per_file)
        write_cifar_binary(folder / name, imgs, labels)
        written[name] = (imgs, labels)
    return written


def test_cifar10_train_and_test(tmp_path):
    written = _write_cifar(tmp_path)
    train, test = CIFAR10(tmp_path), CIFAR10(tmp_path, train=False)
    assert len(train) == 15 and len(test) == 3
    assert train.data.shape == (15, 32, 32, 3) and train.data.dtype == np.uint8
    img, label = train[4]  # second record of data_batch_2
    np.testing.assert_array_equal(img, written["data_batch_2.bin"][0][1])
    assert label == written["data_batch_2.bin"][1][1] and isinstance(label, int)
    x, y = next(iter(DataLoader(CIFAR10(tmp_path, transform=ToTensor()), batch_size=5)))
    assert tuple(x.shape) == (5, 3, 32, 32) and y.dtype == em.int64


def test_cifar10_missing_and_corrupt(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        CIFAR10()
    msg = str(info.value)
    assert "data_batch_1.bin" in msg and "data_batch_5.bin" in msg and "cifar-10-batches-bin" in msg
    assert str(tmp_path / "cifar10") in msg
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10" / "test_batch.bin").write_bytes(b"\x00" * 3000)
    with pytest.raises(ValueError, match="3073-byte record"):
        CIFAR10(train=False)
