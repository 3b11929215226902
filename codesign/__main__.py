"""``python -m codesign`` runs the command line."""

import sys

from codesign.app.cli import main

sys.exit(main())
