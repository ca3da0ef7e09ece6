"""``python -m ragscale.compare``: the same as ``ragscale compare`` (ragscale.commands.compare)."""

import sys

from ragscale.commands.compare import main

if __name__ == "__main__":
    sys.exit(main())
