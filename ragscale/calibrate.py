"""``python -m ragscale.calibrate``: the same as ``ragscale calibrate`` (ragscale.commands.calibrate)."""

import sys

from ragscale.commands.calibrate import main

if __name__ == "__main__":
    sys.exit(main())
