"""`python -m openinfer.cli` runs the command line, as it did when it was the module cli.py."""

import sys

from . import main

sys.exit(main())
