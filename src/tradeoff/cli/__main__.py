"""``python -m tradeoff.cli``: the ``tradeoff`` command."""

import sys

from tradeoff.cli import main

if __name__ == "__main__":
    sys.exit(main())
