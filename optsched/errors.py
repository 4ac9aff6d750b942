"""Errors that carry enough context for a clear, actionable message.

Every error a user can cause names the file, the object and the field, so the
CLI can print one line and exit 2 instead of a traceback.

The errors optsched raises::

    OptschedError
    ├── InputError             bad input or usage: the CLI exits 2
    └── PlanValidationError    a plan broke a hard constraint: a bug, never applied (exit 1)

    kube.client.ApiError       the API server answered with an error (status 0: no answer at all)
    kueue.placement_record.RecordError
                               a placement record on a Workload cannot be read (reported, re-planned)
    solver.assign.AssignmentError
                               solver counts that cannot become GPU indices: a model bug
"""

from __future__ import annotations


class OptschedError(Exception):
    """Base class for errors optsched reports to the user."""


class InputError(OptschedError):
    """Bad input: the message names the source, the object and the field."""

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.source = source
        self.obj = obj
        self.field = field
        self.detail = message
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(part for part in (self.source, self.obj) if part)
        field = f" field {self.field}:" if self.field else ""
        return f"{where}:{field} {self.detail}" if where else f"{field} {self.detail}".strip()

    def located(self, *, source: str = "", obj: str = "") -> InputError:
        """Return a copy with the outer context filled in where it was missing."""
        return InputError(
            self.detail,
            source=self.source or source,
            obj=self.obj or obj,
            field=self.field,
        )


class PlanValidationError(OptschedError):
    """A plan violated a hard constraint: a bug, never applied."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__("plan failed validation:\n  - " + "\n  - ".join(violations))
