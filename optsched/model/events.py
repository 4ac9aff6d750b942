"""A Kubernetes Event as a value: decided by the controller or the node agent, sent by the writer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    """One Event on one object (cluster-scoped objects have no namespace)."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    type: EventType = EventType.WARNING
