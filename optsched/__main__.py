"""``python -m optsched`` runs the same command line as the ``optsched`` script."""

import sys

from optsched.cli import main

sys.exit(main())
