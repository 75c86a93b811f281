"""The README, `ember train --help` and docs/performance.md give the same figures for `ember train`'s default run:
the README and the help round what docs/performance.md records."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
ABOUT = re.compile(r"about (\d+)% test accuracy.*?about (\d+) s", re.S)


def _rounded(text: str, where: str) -> tuple[int, int]:
    found = ABOUT.search(" ".join(text.split()))
    assert found, f"{where} gives no 'about N% test accuracy ... about M s' figure for ember train"
    return int(found.group(1)), int(found.group(2))


def _recorded() -> tuple[float, float]:
    """Accuracy (%) and seconds of the `ember train` row in docs/performance.md's table."""
    for line in (ROOT / "docs" / "performance.md").read_text().splitlines():
        if line.startswith("| `ember train` |"):
            accuracy = re.search(r"(\d+\.\d+)%", line)
            seconds = re.search(r"(\d+(?:\.\d+)?)(?:-\d+(?:\.\d+)?)? s\b", line)
            assert accuracy and seconds, f"docs/performance.md's ember train row has no accuracy and time: {line}"
            return float(accuracy.group(1)), float(seconds.group(1))
    raise AssertionError("docs/performance.md has no '| `ember train` |' row")


def test_readme_help_and_performance_doc_agree_on_ember_train():
    from ember.cli import _TRAIN_DESCRIPTION

    readme = _rounded((ROOT / "README.md").read_text(), "README.md")
    helptext = _rounded(_TRAIN_DESCRIPTION, "ember train --help")
    assert readme == helptext, f"README says {readme}, ember train --help says {helptext}"
    accuracy, seconds = _recorded()
    assert round(accuracy) == readme[0], f"docs/performance.md records {accuracy}%, the README says about {readme[0]}%"
    assert abs(seconds - readme[1]) <= 0.25 * readme[1], \
        f"docs/performance.md records {seconds} s, the README says about {readme[1]} s"
