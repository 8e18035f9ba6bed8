"""``python -m aimegraph.cli``."""

import sys

from aimegraph.cli.app import main

sys.exit(main())
