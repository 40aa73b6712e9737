"""``python -m tradeoff.cli``: the ``tradeoff`` command."""

import sys

from tradeoff.cli import main

sys.exit(main())
