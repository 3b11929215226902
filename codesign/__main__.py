"""``python -m codesign`` runs the command line."""

import sys

from codesign.cli import main

sys.exit(main())
