"""Adversarial examples: FGSM and PGD against LeNet-5 on the MNIST sample, and adversarial training.

Run: python examples/adversarial.py [--checkpoint runs/<run>/checkpoint.safetensors]
With --checkpoint it attacks the model `ember train` wrote; otherwise it trains one for a few epochs
first. It reports clean accuracy and accuracy under FGSM and PGD at eps 0.1 and 0.3 (pixels in
[0, 1]), then fine-tunes on PGD examples (Madry et al.'s adversarial training) and attacks again.
"""

from __future__ import annotations

import argparse
import copy
import time

import ember as em
from ember.nn import functional as F
from ember.train import progress_bar


def fgsm(model, x, y, eps: float):
    """One step of size eps along the sign of the loss gradient (Goodfellow et al.)."""
    x = x.detach().requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    (grad,) = em.autograd.grad(loss, [x])
    return (x + eps * grad.sign()).clamp(0.0, 1.0).detach()


def pgd(model, x, y, eps: float, steps: int, generator=None):
    """Projected gradient descent in the eps-ball around x, from a random start (Madry et al.)."""
    step = 2.5 * eps / steps
    noise = em.empty(x.shape).uniform_(-eps, eps, generator=generator)
    adv = (x + noise).clamp(0.0, 1.0)
    for _ in range(steps):
        adv = adv.detach().requires_grad_(True)
        loss = F.cross_entropy(model(adv), y)
        (grad,) = em.autograd.grad(loss, [adv])
        adv = adv + step * grad.sign()
        adv = (x + (adv - x).clamp(-eps, eps)).clamp(0.0, 1.0)
    return adv.detach()


def accuracy(model, x, y, attack=None, batch: int = 500) -> float:
    """Accuracy on (x, y), on attack(model, xb, yb) examples when given."""
    model.eval()
    correct = 0
    for s in range(0, x.shape[0], batch):
        xb, yb = x[s: s + batch], y[s: s + batch]
        if attack is not None:
            xb = attack(model, xb, yb)
        with em.no_grad():
            correct += int((model(xb).argmax(1) == yb).sum().item())
    return correct / x.shape[0]


def train(model, x, y, epochs: int, lr: float, bar_name: str, progress: bool, attack=None) -> None:
    """Adam on (x, y) in batches of 64; on attack(model, xb, yb) examples when given."""
    opt = em.optim.Adam(model.parameters(), lr=lr)
    for _ in progress_bar(range(epochs), epochs, bar_name, progress):
        order = em.randperm(x.shape[0])
        for s in range(0, x.shape[0], 64):
            xb, yb = x[order[s: s + 64]], y[order[s: s + 64]]
            if attack is not None:
                model.eval()  # the attack sees the model as it is, without dropout or batch statistics
                xb = attack(model, xb, yb)
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def robustness(model, x, y, eps_list, steps: int, seed: int) -> dict:
    """Clean accuracy and accuracy under FGSM and PGD at each eps."""
    gen = em.Generator().manual_seed(seed)  # the same PGD starts for every model
    out = {"clean": accuracy(model, x, y)}
    for eps in eps_list:
        out[f"fgsm_{eps:g}"] = accuracy(model, x, y, lambda m, a, b: fgsm(m, a, b, eps))
        out[f"pgd_{eps:g}"] = accuracy(model, x, y, lambda m, a, b: pgd(m, a, b, eps, steps, gen))
    return out


def main(argv=None) -> dict:
    """Attack a LeNet-5, train it adversarially, attack again; returns the accuracies."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", default=None, help="an `ember train` checkpoint of lenet5 on mnist_sample")
    p.add_argument("--epochs", type=int, default=4, help="training epochs when no checkpoint is given")
    p.add_argument("--adv-epochs", type=int, default=4, help="epochs of adversarial fine-tuning")
    p.add_argument("--train-eps", type=float, default=0.2, help="eps of the PGD examples trained on")
    p.add_argument("--eps", default="0.1,0.3", help="attack sizes, comma-separated")
    p.add_argument("--steps", type=int, default=10, help="PGD steps of the evaluation attack")
    p.add_argument("--train-steps", type=int, default=3, help="PGD steps while training")
    p.add_argument("--test", type=int, default=500, help="test images attacked")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    eps_list = [float(e) for e in args.eps.split(",")]
    train_set, test_set = em.datasets.mnist_sample()
    x_train, y_train = train_set.tensors
    x_test, y_test = (t[: args.test] for t in test_set.tensors)
    model = em.models.get_model("lenet5", num_classes=10, in_channels=1, input_size=(1, 28, 28))
    if args.checkpoint:
        model.load_state_dict(em.load(args.checkpoint)["model"])
    else:
        train(model, x_train, y_train, args.epochs, 1e-3, "LeNet-5", not args.no_progress)
    before = robustness(model, x_test, y_test, eps_list, args.steps, args.seed)
    robust = copy.deepcopy(model)
    gen = em.Generator().manual_seed(args.seed + 1)
    train(robust, x_train, y_train, args.adv_epochs, 1e-3, "adversarial training", not args.no_progress,
          attack=lambda m, a, b: pgd(m, a, b, args.train_eps, args.train_steps, gen))
    after = robustness(robust, x_test, y_test, eps_list, args.steps, args.seed)
    print(f"accuracy on {args.test} test digits   standard  adversarially trained")
    for key in before:
        print(f"  {key:<30}{before[key] * 100:8.1f}%{after[key] * 100:12.1f}%")
    result = {"before": before, "after": after, "seconds": time.perf_counter() - t0}
    worst = max(eps_list)
    print(f"final PGD accuracy at eps {worst:g}: {before[f'pgd_{worst:g}'] * 100:.1f}% -> "
          f"{after[f'pgd_{worst:g}'] * 100:.1f}% with adversarial training  ({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
