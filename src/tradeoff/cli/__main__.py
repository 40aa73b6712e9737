"""`python -m tradeoff.cli`: the `tradeoff` command without its entry point (the GPU node check runs it so)."""

import sys

from tradeoff.cli import main

if __name__ == "__main__":
    sys.exit(main())
