"""The independent plan checker: an invalid plan is a bug and is never applied.

It imports nothing that makes plans (enforced by import-linter), so a bug in a
planner cannot hide itself here.
"""

from optsched.validate.checker import assert_valid, check_plan

__all__ = ["assert_valid", "check_plan"]
