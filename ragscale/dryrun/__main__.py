"""``python -m ragscale.dryrun``: the same as ``ragscale prompts`` (ragscale.commands.prompts)."""

import sys

from ragscale.commands.prompts import main

sys.exit(main())
