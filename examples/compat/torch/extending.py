"""A PyTorch program from "Extending PyTorch" and torch.func's tutorials: a custom autograd.Function (a
straight-through quantiser), gradient hooks on a tensor and on a module, per-sample gradients with
torch.func.vmap and grad over functional_call, anomaly detection, and weight averaging with swa_utils.

It runs unchanged on Ember; for PyTorch, only the import lines marked below differ
(tests/test_compat_corpus.py runs it both ways and compares the numbers). The last line printed is
a JSON summary.
"""

import json

import numpy as np

import ember as torch  # PyTorch: import torch
import ember.nn as nn  # PyTorch: import torch.nn as nn


class Quantize(torch.autograd.Function):
    """Round to multiples of `step` going forward, pass the gradient straight through going back."""

    generate_vmap_rule = True  # torch.func.vmap may map it (Ember's vmap loops, so needs no rule)

    @staticmethod
    def forward(x, step):
        return torch.round(x / step) * step

    @staticmethod
    def setup_context(ctx, inputs, output):  # the form torch.func's transforms need
        x, step = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 4.0).to(grad.dtype), None  # no gradient where the input saturates


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(Quantize.apply(torch.tanh(self.hidden(x)), 0.25))


rng = np.random.RandomState(0)
points = torch.tensor(rng.randn(64, 4).astype(np.float32))
labels = torch.tensor(rng.randint(0, 3, 64))

torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
averaged = torch.optim.swa_utils.AveragedModel(model)
loss_fn = nn.CrossEntropyLoss()

seen_grad_norms = []
hook = model.out.register_full_backward_hook(lambda module, grad_input, grad_output:
                                             seen_grad_norms.append(float(grad_output[0].norm())))
model.hidden.weight.register_hook(lambda grad: grad.clamp(-0.05, 0.05))  # clip this parameter's gradient

losses = []
with torch.autograd.detect_anomaly():
    for _epoch in range(6):
        for start in range(0, 64, 16):
            optimizer.zero_grad()
            loss = loss_fn(model(points[start:start + 16]), labels[start:start + 16])
            loss.backward()
            optimizer.step()
            averaged.update_parameters(model)
        losses.append(loss.item())

# per-sample gradients of the trained model's loss: vmap over the batch of grad of a functional call (PyTorch's
# module backward hooks do not work under torch.func's transforms, so this one goes first)
hook.remove()
params = {name: p.detach() for name, p in model.named_parameters()}


def sample_loss(params, x, y):
    logits = torch.func.functional_call(model, params, (x.unsqueeze(0),))
    return loss_fn(logits, y.unsqueeze(0))


per_sample = torch.func.vmap(torch.func.grad(sample_loss), in_dims=(None, 0, 0))(params, points[:8], labels[:8])
mean_of_samples = per_sample["out.weight"].mean(0)
model.zero_grad()
loss_fn(model(points[:8]), labels[:8]).backward()

print(json.dumps({
    "losses": losses,
    "hook_norms": seen_grad_norms[:4],
    "per_sample_shape": list(per_sample["hidden.weight"].shape),
    "per_sample_mean_is_batch_grad": bool(torch.allclose(mean_of_samples, model.out.weight.grad, atol=1e-6)),
    "averaged_first_weight": [float(v) for v in averaged.module.hidden.weight[0]],
}))
