"""``python -m ragscale.report``: the same as ``ragscale report`` (ragscale.commands.report)."""

import sys

from ragscale.commands.report import main

if __name__ == "__main__":
    sys.exit(main())
