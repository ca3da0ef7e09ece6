"""``python -m ragscale.agree``: the same as ``ragscale agree`` (ragscale.commands.agree)."""

import sys

from ragscale.commands.agree import main

if __name__ == "__main__":
    sys.exit(main())
