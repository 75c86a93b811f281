"""Training history: per-epoch metrics, saved as JSON and plotted as loss/accuracy curves."""

from __future__ import annotations

import json
import os

from ember.train.callbacks import writing


class History:
    """Metrics per epoch (`history["loss"]`, `history["val_accuracy"]`, ...)."""

    def __init__(self) -> None:
        self.history: dict[str, list] = {}
        self.epochs: list[int] = []

    def record(self, epoch: int, metrics: dict) -> None:
        """Append one epoch's metrics."""
        self.epochs.append(epoch)
        for k, v in metrics.items():
            self.history.setdefault(k, []).append(float(v))

    def __getitem__(self, key: str) -> list:
        return self.history[key]

    def last(self, key: str, default=None):
        """The latest value of a metric."""
        values = self.history.get(key)
        return values[-1] if values else default

    def state_dict(self) -> dict:
        """Epochs and metrics, for a checkpoint."""
        return {"epochs": list(self.epochs), "metrics": {k: list(v) for k, v in self.history.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict returned."""
        self.epochs = [int(e) for e in state["epochs"]]
        self.history = {k: [float(v) for v in values] for k, values in state["metrics"].items()}

    def to_json(self, path: str) -> None:
        """Write {"epoch": [...], metric: [...]} to path."""
        with writing(path), open(path, "w") as f:
            json.dump({"epoch": self.epochs, **self.history}, f, indent=2)

    def figure(self):
        """The loss and accuracy curves (train and validation) as a matplotlib Figure; needs the `plot` extra."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from matplotlib.ticker import MaxNLocator
        except ImportError as e:
            raise ImportError("History.plot needs matplotlib: pip install ember[plot]") from e
        panels = [m for m in ("loss", "accuracy") if m in self.history or f"val_{m}" in self.history]
        fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5 * max(len(panels), 1), 3.6))
        axes = axes if hasattr(axes, "__len__") else [axes]
        for ax, m in zip(axes, panels):
            for key, style in ((m, "-o"), (f"val_{m}", "-s")):
                if key in self.history:
                    ax.plot(self.epochs, self.history[key], style, label=key, markersize=3)
            ax.set_xlabel("epoch")
            if len(set(self.epochs)) > 1:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs 1, 2, 3..., never 2.5
            else:  # one epoch: the locator would fall back to fractions around it
                ax.set_xticks(self.epochs)
            ax.set_title(m)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        return fig

    def plot(self, path: str) -> str:
        """Write the curves of figure() to a PNG; needs the `plot` extra."""
        import matplotlib.pyplot as plt

        fig = self.figure()
        try:
            with writing(path):
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                fig.savefig(path, dpi=110)
        finally:
            plt.close(fig)
        return path
