"""A MigControl for tests that fails, lies or crashes at the call it is told to, and logs every call.

It wraps a :class:`SimulatedMig` (which keeps the real placement rules) and
counts calls per kind (``instances``, ``create``, ``destroy``) from 1:

* ``fail={"create": {2}}``: the 2nd create raises ``BackendError``;
  ``fail_from={"create": 2}``: the 2nd and every later create does;
* ``silent={3}``: the 3rd create reports success but creates nothing (a verify mismatch);
* ``crash=("destroy", 1)``: the 1st destroy raises :class:`Crash`, a ``BaseException``
  that the apply does not catch, as a killed process would stop it;
* ``in_use={1}``: every instance of GPU 1 reads as in use;
  ``in_use_at={(0, 4)}``: the instance of GPU 0 at start 4 does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from optsched.agent.backend import BackendError
from optsched.agent.devices import MigInstance
from optsched.agent.simulated_mig import SimulatedMig


class Crash(BaseException):
    """The process died here."""


@dataclass
class FaultyMig:
    inner: SimulatedMig
    fail: dict[str, set[int]] = field(default_factory=dict)
    fail_from: dict[str, int] = field(default_factory=dict)
    silent: set[int] = field(default_factory=set)
    crash: tuple[str, int] | None = None
    in_use: set[int] = field(default_factory=set)
    in_use_at: set[tuple[int, int]] = field(default_factory=set)
    calls: Counter[str] = field(default_factory=Counter)
    log: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(kind, gpu, profile, start) of every create and destroy that went through."""

    def _tick(self, kind: str) -> int:
        self.calls[kind] += 1
        n = self.calls[kind]
        if self.crash == (kind, n):
            raise Crash(f"{kind} #{n}")
        if n in self.fail.get(kind, set()) or n >= self.fail_from.get(kind, n + 1):
            raise BackendError(f"injected failure of {kind} #{n}")
        return n

    def instances(self, gpu: int) -> tuple[MigInstance, ...]:
        self._tick("instances")
        found = self.inner.instances(gpu)
        return tuple(
            replace(i, in_use=True) if gpu in self.in_use or (gpu, i.start) in self.in_use_at else i
            for i in found
        )

    def create(self, gpu: int, profile: str, start: int) -> MigInstance:
        n = self._tick("create")
        if n in self.silent:
            return MigInstance(profile=profile, start=start, size=1)
        made = self.inner.create(gpu, profile, start)
        self.log.append(("create", gpu, profile, start))
        return made

    def destroy(self, gpu: int, start: int) -> None:
        self._tick("destroy")
        profile = next((i.profile for i in self.inner.instances(gpu) if i.start == start), "?")
        self.inner.destroy(gpu, start)
        self.log.append(("destroy", gpu, profile, start))
