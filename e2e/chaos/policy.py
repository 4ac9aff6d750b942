"""What the fault proxy does with one request: pass it, answer it with an error, hold it, or cut it.

Pure, so the decisions are unit-tested without sockets: :func:`decide` takes
the request's method and path, whether it is a watch, the active
:class:`Mode` and a random generator, and returns a :class:`Decision`. The
answers look like the API server's own: a ``Status`` body with the reason and
code Kubernetes uses, and for 429 a ``Retry-After`` header with
``details.retryAfterSeconds``.
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Action(enum.StrEnum):
    PASS = "pass"
    RESPOND = "respond"
    """Answer with ``status`` and ``body`` instead of forwarding."""
    HANG = "hang"
    """Send nothing for ``seconds``, then close the connection."""
    DROP = "drop"
    """Close the connection without an answer."""
    CUT = "cut"
    """Forward a watch, then close its stream after ``seconds``."""


class Fault(enum.StrEnum):
    NONE = "none"
    CONFLICT = "409"
    THROTTLE = "429"
    ERROR = "500"
    HANG = "hang"
    DROP = "drop"


@dataclass(frozen=True)
class Mode:
    """The fault the proxy injects now, and into what share of the requests it applies to."""

    fault: Fault = Fault.NONE
    probability: float = 0.0
    hang_seconds: float = 30.0
    retry_after: int = 1


@dataclass(frozen=True)
class Decision:
    action: Action
    status: int = 0
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0


PASS = Decision(Action.PASS)


def is_watch(target: str) -> bool:
    query = parse_qs(urlsplit(target).query)
    return query.get("watch", [""])[0] in ("true", "1")


def status_body(code: int, reason: str, message: str, retry_after: int | None = None) -> bytes:
    doc: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if retry_after is not None:
        doc["details"] = {"retryAfterSeconds": retry_after}
    return json.dumps(doc).encode()


def _resource(target: str) -> str:
    parts = [p for p in urlsplit(target).path.split("/") if p]
    return "/".join(parts[-2:]) if len(parts) >= 2 else (parts[0] if parts else "/")


def decide(method: str, target: str, mode: Mode, rng: random.Random) -> Decision:
    """The proxy's answer to one request under ``mode``."""
    if mode.fault is Fault.NONE or mode.probability <= 0:
        return PASS
    watch = method == "GET" and is_watch(target)
    if mode.fault is Fault.CONFLICT and method not in WRITES:
        return PASS
    if rng.random() >= mode.probability:
        return PASS
    what = _resource(target)
    json_type = (("Content-Type", "application/json"),)
    if mode.fault is Fault.CONFLICT:
        message = (
            f"Operation cannot be fulfilled on {what}: the object has been modified; "
            "please apply your changes "
            "to the latest version and try again"
        )
        return Decision(Action.RESPOND, 409, status_body(409, "Conflict", message), json_type)
    if mode.fault is Fault.THROTTLE:
        body = status_body(
            429, "TooManyRequests", "the server has received too many requests", mode.retry_after
        )
        return Decision(Action.RESPOND, 429, body, (*json_type, ("Retry-After", str(mode.retry_after))))
    if mode.fault is Fault.ERROR:
        body = status_body(500, "InternalError", f"Internal error occurred: injected fault on {what}")
        return Decision(Action.RESPOND, 500, body, json_type)
    if mode.fault is Fault.HANG:
        return Decision(Action.HANG, seconds=mode.hang_seconds)
    if watch:
        return Decision(Action.CUT, seconds=rng.uniform(0.5, 5.0))
    return Decision(Action.DROP)
