"""`python -m ember ...`: the command-line interface (see ember.cli)."""

import sys

from ember.cli import main

if __name__ == "__main__":
    sys.exit(main())
