"""Small data sets written in their real file formats, for `ember train --data DIR` without downloads."""

import numpy as np

from ember.datasets import write_idx


def fake_mnist(folder, n_train=40, n_test=12):
    """The four MNIST IDX files (gzipped) with random digits, in `folder` (created); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n).astype(np.uint8))
    return folder
