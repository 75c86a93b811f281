"""`ember.Size`: what `.shape` and `.size()` return, against torch.Size."""

import pickle

import numpy as np
import pytest
import torch

import ember as em


def test_shape_and_size_are_sizes_like_torch():
    e, t = em.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    for got, want in ((e.shape, t.shape), (e.size(), t.size())):
        assert isinstance(got, em.Size) and isinstance(got, tuple)
        assert got == want == (2, 3, 4) and hash(got) == hash(want)
        assert got.numel() == want.numel() == 24
    assert repr(e.shape) == str(e.shape) == "ember.Size([2, 3, 4])"
    assert em.zeros(()).shape.numel() == torch.Size([]).numel() == 1
    assert em.zeros(3, 0).shape.numel() == 0
    assert e.size(1) == 3 and type(e.size(-1)) is int


def test_size_arithmetic_and_tuple_behaviour():
    s = em.zeros(2, 3).shape
    for got, want in ((s + (4,), torch.Size([2, 3]) + (4,)), ((1,) + s, (1,) + torch.Size([2, 3])),
                      (s * 2, torch.Size([2, 3]) * 2), (2 * s, 2 * torch.Size([2, 3]))):
        assert type(got) is em.Size and got == tuple(want)
    a, b = s
    assert (a, b) == (2, 3) and s[0] == 2 and s[1:] == (3,) and list(s) == [2, 3] and s.index(3) == 1
    assert s == (2, 3) and s != [2, 3] and s == torch.Size([2, 3])
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is em.Size
    assert em.Size([2, np.int64(3), em.tensor(4)]) == (2, 3, 4)
    with pytest.raises(TypeError, match=r"Size\(\) takes an iterable of 'int' \(item 0 is 'float'\)"):
        em.Size([2.5])


def test_sizes_are_accepted_wherever_shapes_are():
    x = em.arange(6.0)
    s = em.zeros(2, 3).shape
    assert em.zeros(s).shape == s and x.reshape(s).shape == s and x.view(s).shape == s
    assert em.ones(*s).shape == s and em.full(s, 2.0).shape == s and x.reshape(s).expand(2, *s).shape == (2, 2, 3)
    assert np.zeros(s).shape == (2, 3)
