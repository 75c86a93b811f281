"""A DCGAN-style GAN on the MNIST sample: ConvTranspose2d generator, strided-conv discriminator with
BatchNorm and LeakyReLU, BCEWithLogits losses; writes a PNG grid of generated digits.

Run: python examples/dcgan_mnist.py [--epochs 8] [--out runs/dcgan_mnist]
The figure reported: how many of 256 generated digits a LeNet-5 trained on the real digits
classifies with confidence above 0.9, and how many of the ten classes they cover.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from image_grid import save_samples  # noqa: E402

import ember as em  # noqa: E402
from ember import nn  # noqa: E402
from ember.nn import functional as F  # noqa: E402
from ember.train import progress_bar  # noqa: E402


def generator(latent: int) -> nn.Module:
    """latent -> 7x7x64 -> 14x14x32 -> 28x28x1 logits."""
    return nn.Sequential(
        nn.Linear(latent, 64 * 7 * 7), nn.BatchNorm1d(64 * 7 * 7), nn.ReLU(), nn.Unflatten(1, (64, 7, 7)),
        nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1),
    )


def discriminator() -> nn.Module:
    """28x28 image -> one logit (real or generated)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
        nn.Conv2d(32, 64, 4, stride=2, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1),
    )


def judge(x_train, y_train, epochs: int = 3):
    """A LeNet-5 trained on the real digits, to recognise the generated ones."""
    model = em.models.get_model("lenet5", num_classes=10, in_channels=1, input_size=(1, 28, 28))
    opt = em.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        order = em.randperm(x_train.shape[0])
        for s in range(0, x_train.shape[0], 64):
            idx = order[s: s + 64]
            opt.zero_grad()
            F.cross_entropy(model(x_train[idx]), y_train[idx]).backward()
            opt.step()
    return model.eval()


def parser() -> argparse.ArgumentParser:
    """The command line: training settings and where the samples go."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--latent", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", default=os.path.join("runs", "dcgan_mnist"), metavar="DIR",
                   help="folder for samples.png, a grid of 64 samples (default: runs/dcgan_mnist; '' for none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv=None) -> dict:
    """Train the GAN; report recognisable samples and classes covered; save a grid of samples."""
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    train, _ = em.datasets.mnist_sample()
    x_real, y_real = train.tensors
    g, d = generator(args.latent), discriminator()
    opt_g = em.optim.Adam(g.parameters(), lr=args.lr, betas=(0.5, 0.999))
    opt_d = em.optim.Adam(d.parameters(), lr=args.lr, betas=(0.5, 0.999))
    n = x_real.shape[0]
    for _ in (bar := progress_bar(range(args.epochs), args.epochs, "GAN", not args.no_progress)):
        order = em.randperm(n)
        for s in range(0, n - args.batch_size + 1, args.batch_size):
            real = x_real[order[s: s + args.batch_size]]
            fake = g(em.randn(args.batch_size, args.latent)).sigmoid()
            ones, zeros = em.ones(args.batch_size, 1), em.zeros(args.batch_size, 1)
            opt_d.zero_grad()  # the discriminator: real digits are 1, generated ones 0
            loss_d = (F.binary_cross_entropy_with_logits(d(real), ones)
                      + F.binary_cross_entropy_with_logits(d(fake.detach()), zeros))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()  # the generator: make the discriminator say 1
            loss_g = F.binary_cross_entropy_with_logits(d(fake), ones)
            loss_g.backward()
            opt_g.step()
        if not args.no_progress:
            bar.set_postfix(loss_d=f"{loss_d.item():.3f}", loss_g=f"{loss_g.item():.3f}")
    g.eval()
    classifier = judge(x_real, y_real)
    with em.no_grad():
        samples = g(em.randn(256, args.latent)).sigmoid()
        probs = classifier(samples).softmax(1)
    confident = probs.max(1).values > 0.9
    classes = sorted({int(c) for c in probs.argmax(1)[confident].tolist()})
    result = {"recognisable": float(confident.float().mean().item()), "classes": len(classes),
              "seconds": time.perf_counter() - t0}
    if args.out:
        path = save_samples(args.out, samples[:64].reshape(64, 28, 28).numpy())
        print(f"wrote 64 samples to {os.path.abspath(path)}")
    print(f"final: {result['recognisable'] * 100:.1f}% of 256 generated digits recognised with confidence > 0.9, "
          f"covering {len(classes)} of 10 classes  ({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
