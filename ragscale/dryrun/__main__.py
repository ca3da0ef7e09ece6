"""``python -m ragscale.dryrun``: the same as ``ragscale prompts``."""

import sys

from ragscale.dryrun import main

sys.exit(main())
