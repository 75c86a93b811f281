"""ember.jit with a varying batch size: one symbolic trace serves the sizes it holds for, and every
result equals eager mode's, including sizes the program must refuse (strided batches, size branches)."""

import numpy as np
import pytest

import ember as em
from ember import nn

SIZES = (8, 5, 8, 3, 6, 2, 1, 7)


def _data(rng, b, shape):
    return em.tensor(rng.standard_normal((b,) + shape).astype("float32")), em.tensor(rng.integers(0, 10, b))


class SmallResNet(nn.Module):
    """Conv, batch norm, dropout and a strided option-A shortcut (x[:, :, ::2, ::2] then pad)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = nn.functional.relu(self.bn1(self.conv1(x)))
        short = nn.functional.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, 2, 2))
        x = nn.functional.relu(self.bn2(self.conv2(x)) + short)
        x = self.drop(x.mean(dim=(2, 3)))
        return self.fc(x)


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10)), (3, 2, 2)),
    "small_resnet": (SmallResNet, (3, 6, 6)),
}


def _train(model_name, jit, sizes=SIZES):
    make, shape = MODELS[model_name]
    em.manual_seed(0)
    model = make()
    opt = em.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = em.jit(step, passes=False) if jit else step
    rng = np.random.default_rng(1)
    losses = [float(run(*_data(rng, b, shape))) for b in sizes]
    return losses, model, run


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_training_over_varying_batch_sizes_equals_eager(model_name):
    losses, model, run = _train(model_name, jit=True)
    want, ref, _ = _train(model_name, jit=False)
    np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    for b, q in zip(model.buffers(), ref.buffers()):
        np.testing.assert_allclose(b.numpy(), q.numpy(), rtol=1e-4, atol=1e-6)
    assert run.trace_count <= 4  # 6 sizes; static traces for the first ones and size 1, one symbolic program


def test_dynamic_false_traces_every_size():
    f = em.jit(lambda x: (x * 2).sum(dim=1), dynamic=False)
    for b in (4, 3, 5):
        f(em.ones(b, 2))
    assert f.trace_count == 3
    with pytest.raises(ValueError, match="jit: dynamic"):
        em.jit(lambda x: x, dynamic=True)


def test_sizes_read_as_numbers_follow_the_batch():
    @em.jit
    def f(x):
        n = x.shape[0]
        return x.sum(dim=0) / n + n * 0.5

    for b in (4, 6, 3, 9, 2):
        x = em.tensor(np.arange(b * 2, dtype="float32").reshape(b, 2))
        np.testing.assert_allclose(f(x).numpy(), x.numpy().mean(axis=0) + b * 0.5, rtol=1e-6)
    assert f.trace_count == 2


def test_factories_of_a_symbolic_size_fix_it():
    # em.arange(n) and em.zeros(n) are constants of the trace: their size is a guard, so each size
    # gets its own program, and every result is right.
    @em.jit
    def f(x):
        n = x.shape[0]
        return x.sum() + em.arange(n).sum() + em.zeros(n, 2).sum()

    for b in (4, 6, 3, 4):
        np.testing.assert_allclose(float(f(em.ones(b))), b + b * (b - 1) / 2)
    assert f.trace_count == 3


def test_a_python_branch_on_the_size_is_guarded():
    @em.jit
    def f(x):
        return x * 2 if x.shape[0] > 4 else x * 3

    for b in (6, 5, 7, 3, 8, 2):
        np.testing.assert_array_equal(f(em.ones(b, 2)).numpy(), np.full((b, 2), 2.0 if b > 4 else 3.0))
    assert f.trace_count <= 4


def test_a_strided_batch_is_not_generalised():
    @em.jit
    def f(x):
        return x[::2] * 2

    for b in (6, 5, 7, 4, 3):
        x = em.tensor(np.arange(b, dtype="float32"))
        np.testing.assert_array_equal(f(x).numpy(), np.arange(b, dtype="float32")[::2] * 2)


def test_labels_and_index_arrays_follow_the_batch():
    @em.jit
    def f(logits, y):
        return logits.gather(1, y[:, None]).sum()

    rng = np.random.default_rng(0)
    for b in (5, 4, 7, 3):
        logits = rng.standard_normal((b, 6)).astype("float32")
        y = rng.integers(0, 6, b)
        np.testing.assert_allclose(float(f(em.tensor(logits), em.tensor(y))), logits[np.arange(b), y].sum(),
                                   rtol=1e-6)
    assert f.trace_count == 2
