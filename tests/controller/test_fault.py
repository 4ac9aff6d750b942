"""The fault-injection point does nothing unless the environment names it."""

from __future__ import annotations

import os
import signal

import pytest

from optsched.controller import fault


def test_a_point_not_named_does_nothing_and_a_named_one_kills(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.delenv(fault.FAULT_ENV, raising=False)
    fault.reach(fault.AFTER_CLAIM_CREATED)
    monkeypatch.setenv(fault.FAULT_ENV, "another-point")
    fault.reach(fault.AFTER_CLAIM_CREATED)
    assert killed == []
    monkeypatch.setenv(fault.FAULT_ENV, fault.AFTER_CLAIM_CREATED)
    fault.reach(fault.AFTER_CLAIM_CREATED)
    assert killed == [(os.getpid(), signal.SIGKILL)]
