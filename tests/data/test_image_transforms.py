"""Image transforms: layouts, values, padding, and seeded randomness (also inside DataLoader workers)."""

import numpy as np
import pytest

import ember as em
from ember.data import DataLoader, Dataset
from ember.data.transforms import Compose, Lambda, Normalize, RandomCrop, RandomHorizontalFlip, ToTensor


def _img(h=6, w=5, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)


def test_to_tensor_hwc_uint8():
    img = _img()
    t = ToTensor()(img)
    assert t.dtype == em.float32 and tuple(t.shape) == (3, 6, 5)
    np.testing.assert_allclose(t.numpy(), img.transpose(2, 0, 1) / 255, rtol=1e-6)
    assert 0.0 <= t.min().item() and t.max().item() <= 1.0


def test_to_tensor_grayscale_float_and_tensor_inputs():
    gray = _img(c=1)[..., 0]
    assert tuple(ToTensor()(gray).shape) == (1, 6, 5)
    floats = np.full((2, 2, 3), 7.5, np.float64)
    t = ToTensor()(floats)
    assert t.dtype == em.float64 and t.numpy().max() == 7.5
    u8 = em.from_numpy(_img().transpose(2, 0, 1).copy())
    np.testing.assert_allclose(ToTensor()(u8).numpy(), u8.numpy() / 255, rtol=1e-6)
    with pytest.raises(ValueError, match="ToTensor"):
        ToTensor()(np.zeros((2, 2, 2, 2), np.uint8))


def test_normalize_tensor_and_array():
    t = ToTensor()(_img())
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
    out = Normalize(mean, std)(t)
    expect = (t.numpy() - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-6)
    hwc = _img().astype(np.float32) / 255
    np.testing.assert_allclose(Normalize(mean, std)(hwc), (hwc - mean) / std, rtol=1e-5, atol=1e-6)
    batch = em.stack([t, t])
    assert tuple(Normalize(mean, std)(batch).shape) == (2, 3, 6, 5)
    same = t.clone()
    assert Normalize(mean, std, inplace=True)(same) is same


def test_normalize_errors():
    with pytest.raises(ValueError, match="zeros"):
        Normalize([0.0], [0.0])
    with pytest.raises(TypeError, match="ToTensor"):
        Normalize([0.0], [1.0])(em.zeros(1, 2, 2, dtype=em.uint8))
    with pytest.raises(ValueError, match="channels"):
        Normalize([0.0, 0.0], [1.0, 1.0])(em.zeros(3, 2, 2))


def test_random_crop_window_from_padded_image():
    img = _img(8, 8)
    em.manual_seed(0)
    crop = RandomCrop(8, padding=2)(img)
    assert crop.shape == (8, 8, 3)
    padded = np.pad(img, ((2, 2), (2, 2), (0, 0)))
    windows = [padded[i:i + 8, j:j + 8] for i in range(5) for j in range(5)]
    assert any(np.array_equal(crop, w) for w in windows)


def test_random_crop_is_seeded_and_agrees_between_array_and_tensor():
    img = _img(10, 9)
    t = em.from_numpy(img.transpose(2, 0, 1).copy())
    em.manual_seed(3)
    a = RandomCrop((4, 5), padding=1)(img)
    em.manual_seed(3)
    b = RandomCrop((4, 5), padding=1)(t)
    assert tuple(b.shape) == (3, 4, 5)
    np.testing.assert_array_equal(a.transpose(2, 0, 1), b.numpy())
    g1, g2 = em.Generator().manual_seed(9), em.Generator().manual_seed(9)
    np.testing.assert_array_equal(RandomCrop(3, generator=g1)(img), RandomCrop(3, generator=g2)(img))


@pytest.mark.parametrize("mode,np_mode", [("edge", "edge"), ("reflect", "reflect"), ("constant", "constant")])
def test_random_crop_padding_modes(mode, np_mode):
    img = _img(4, 4)
    out = RandomCrop(8, padding=2, padding_mode=mode)(img)  # the only window is the whole padded image
    np.testing.assert_array_equal(out, np.pad(img, ((2, 2), (2, 2), (0, 0)), mode=np_mode))
    t = em.from_numpy(img.transpose(2, 0, 1).copy())
    np.testing.assert_array_equal(RandomCrop(8, padding=2, padding_mode=mode)(t).numpy(), out.transpose(2, 0, 1))


def test_random_crop_padding_forms_fill_and_pad_if_needed():
    img = _img(4, 4)
    out = RandomCrop((6, 8), padding=(2, 1), fill=255)(img)  # (left/right 2, top/bottom 1)
    assert out.shape == (6, 8, 3) and (out[0] == 255).all() and (out[:, 0] == 255).all()
    out = RandomCrop((4, 7), padding=(1, 0, 2, 0))(img)  # (left, top, right, bottom)
    assert out.shape == (4, 7, 3) and (out[:, 0] == 0).all() and (out[:, -2:] == 0).all()
    assert RandomCrop(6, pad_if_needed=True)(img).shape == (6, 6, 3)
    with pytest.raises(ValueError, match="larger"):
        RandomCrop(5)(img)


def test_random_horizontal_flip():
    img = _img()
    np.testing.assert_array_equal(RandomHorizontalFlip(1.0)(img), img[:, ::-1])
    assert RandomHorizontalFlip(0.0)(img) is img
    t = ToTensor()(img)
    np.testing.assert_array_equal(RandomHorizontalFlip(1.0)(t).numpy(), t.numpy()[..., ::-1])
    em.manual_seed(0)
    flips = sum(RandomHorizontalFlip(0.3)(img)[0, 0, 0] != img[0, 0, 0] for _ in range(400))
    assert 80 < flips < 160
    with pytest.raises(ValueError):
        RandomHorizontalFlip(1.5)


def test_compose_cifar_style_pipeline():
    pipeline = Compose([RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(),
                        Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26)), Lambda(lambda x: x * 1)])
    out = pipeline(_img(32, 32))
    assert tuple(out.shape) == (3, 32, 32) and out.dtype == em.float32
    assert "RandomCrop" in repr(pipeline)


class Augmented(Dataset):
    def __init__(self):
        self.t = Compose([RandomCrop(6, padding=3), RandomHorizontalFlip(), ToTensor()])

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return self.t(_img(6, 6, seed=i))


def test_augmentation_in_workers_is_reproducible():
    def run():
        loader = DataLoader(Augmented(), batch_size=2, num_workers=2, timeout=20,
                            generator=em.Generator().manual_seed(1))
        return np.concatenate([b.numpy() for b in loader])

    np.testing.assert_array_equal(run(), run())
