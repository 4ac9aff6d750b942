"""``python -m e2e.chaos --minutes M --seed S``: the fault-injection soak (see :mod:`e2e.chaos.cli`)."""

from __future__ import annotations

import sys

from e2e.chaos.cli import main

if __name__ == "__main__":
    sys.exit(main())
