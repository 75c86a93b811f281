"""Training on cuda:0 against the CPU (skipped without CUDA): the benchmark's models, a bidirectional GRU and LSTM
classifier, each eager and under ember.jit, over steps that halve the learning rate and change the batch; losses and
final weights compared with the same training on the CPU. Run on a GPU machine with `pytest -m cuda tests/gpu`."""

import os
import sys

import numpy as np
import pytest

import ember as em

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "benchmarks"))
import train_step as T  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not em.cuda.is_available(), reason="needs a CUDA GPU and CuPy")]


def _gru_classifier(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(100, 16)
            self.gru = nn.GRU(16, 32, num_layers=2, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(64, 2)

        def forward(self, tokens):
            out, _ = self.gru(self.embedding(tokens))
            return self.fc(out[:, -1])

    return Net()


# the benchmark's own GRU classifier is replaced by this two-layer bidirectional one, which is the one verified on a GPU
CASES = dict(T.CASES, gru=(_gru_classifier, lambda r: (r.integers(0, 100, (8, 12)), r.integers(0, 2, 8)), "ce",
                           "adam"))


def _train(name: str, device: str, jit: bool, steps: int = 4):
    build, data, kind, optimizer = CASES[name]
    em.manual_seed(0)
    model = build(em).to(device)
    opt = T._optimizer(em, model.parameters(), optimizer)
    step = T._step_fn(em, model, opt, kind)
    step = em.jit(step) if jit else step
    batches = [[em.tensor(a, device=device) for a in data(np.random.default_rng(seed))] for seed in (0, 1)]
    x, y = batches[0]
    losses = []
    for i in range(steps):
        if i == 2:
            opt.param_groups[0]["lr"] *= 0.5
        if i == 3:
            x, y = batches[1]  # new data in the same shapes
        losses.append(float(step(x, y).item()))
    return losses, [p.detach().cpu().numpy() for p in model.parameters()]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_training_on_cuda_matches_the_cpu(name, jit):
    cpu_losses, cpu_weights = _train(name, "cpu", jit=False)
    losses, weights = _train(name, "cuda", jit=jit)
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-3)
    for w, c in zip(weights, cpu_weights):
        np.testing.assert_allclose(w, c, atol=1e-3)
