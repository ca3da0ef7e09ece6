"""``python -m ragscale.plot``: the same as ``ragscale plot`` (ragscale.commands.plot)."""

import sys

from ragscale.commands.plot import main

if __name__ == "__main__":
    sys.exit(main())
