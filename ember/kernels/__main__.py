"""`python -m ember.kernels`: this machine as the kernel layer sees it, and every op's algorithms and thresholds
(`python -m ember.kernels doc`: the Markdown of docs/kernels.md's generated part)."""

from __future__ import annotations

import sys

from ember.kernels import machine, selection


def main(argv: list[str]) -> int:
    """Print the machine line, or with `doc` the selection tables as Markdown."""
    import ember.ops  # noqa: F401 - every op module registers its algorithms when imported
    from ember.kernels.conv import affine  # noqa: F401 - conv2d_affine's list (the jit's joined op)

    if argv[:1] == ["doc"]:
        print(selection.document(), end="")
        return 0
    print(machine.describe())
    print()
    print(selection.document(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
