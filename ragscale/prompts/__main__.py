"""``python -m ragscale.prompts``: the same as ``ragscale prompts``."""

import sys

from ragscale.prompts import main

sys.exit(main())
