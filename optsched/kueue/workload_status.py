"""Reading the state of raw Kueue Workload objects: the one place Kueue's status is interpreted.

Conditions (``QuotaReserved``, ``Admitted``, ``Finished``), ``spec.active``, the
admission-check entries and the quota reservation (``status.admission``) mean
the same to the snapshot reader and to the controller, so both read them here.
Kept tolerant on purpose: a controller sees every Workload in the cluster,
including ones it does not manage and ones a user wrote by hand, and must
never crash on a field of the wrong type (the snapshot reader checks field
types itself, to name a malformed one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from optsched.model.names import KUEUE_JOB_UID_LABEL
from optsched.model.snapshot import CheckState, QuotaReservation


def map_or_empty(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else ``{}``: the tolerant read of a raw field anyone may have written."""
    return value if isinstance(value, dict) else {}


def list_or_empty(value: Any) -> list[Any]:
    """``value`` if it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return map_or_empty(obj.get("metadata"))


def key_of(obj: Mapping[str, Any]) -> str:
    m = meta(obj)
    return f"{m.get('namespace', 'default')}/{m.get('name', '')}"


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in list_or_empty(map_or_empty(obj.get("status")).get("conditions")):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def parse_time(raw: Any) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class CheckEntry:
    """One entry of ours in ``status.admissionChecks`` of a Workload."""

    name: str
    state: CheckState | None
    """None for a state Kueue does not define (the workload is then left alone)."""
    message: str = ""
    last_transition_time: str = ""
    retry_count: int = 0
    """Kueue's count of Retries of this check (``retryCount``): what the backoff doubles on."""
    pod_set_updates: tuple[dict[str, Any], ...] = ()


def _entry(raw: dict[str, Any]) -> CheckEntry:
    state = str(raw.get("state", ""))
    retries = raw.get("retryCount")
    updates = list_or_empty(raw.get("podSetUpdates"))
    return CheckEntry(
        name=str(raw["name"]),
        state=CheckState(state) if state in CheckState._value2member_map_ else None,
        message=str(raw.get("message", "")),
        last_transition_time=str(raw.get("lastTransitionTime", "")),
        retry_count=retries
        if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0
        else 0,
        pod_set_updates=tuple(u for u in updates if isinstance(u, dict)),
    )


def check_entries(workload: Mapping[str, Any], check_names: Iterable[str]) -> tuple[CheckEntry, ...]:
    """Every entry among ``check_names`` the workload carries, in its order."""
    wanted = set(check_names)
    return tuple(
        _entry(e)
        for e in list_or_empty(map_or_empty(workload.get("status")).get("admissionChecks"))
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"] in wanted
    )


def owners_of(obj: Mapping[str, Any]) -> frozenset[str]:
    """Owner uids and ``Kind/name``s of an object, and the Job uid Kueue labels a Workload with."""
    m = meta(obj)
    out: set[str] = set()
    for ref in list_or_empty(m.get("ownerReferences")):
        if isinstance(ref, dict):
            if ref.get("uid"):
                out.add(str(ref["uid"]))
            if ref.get("kind") and ref.get("name"):
                out.add(f"{ref['kind']}/{ref['name']}")
    job_uid = map_or_empty(m.get("labels")).get(KUEUE_JOB_UID_LABEL)
    if job_uid:
        out.add(str(job_uid))
    return frozenset(out)


def check_states(workload: Mapping[str, Any]) -> dict[str, CheckState]:
    """Every admission-check entry with a state Kueue defines, by check name."""
    out: dict[str, CheckState] = {}
    for entry in list_or_empty(map_or_empty(workload.get("status")).get("admissionChecks")):
        if (
            isinstance(entry, dict)
            and entry.get("name")
            and entry.get("state") in CheckState._value2member_map_
        ):
            out[str(entry["name"])] = CheckState(entry["state"])
    return out


class Lifecycle(StrEnum):
    """Where a Workload stands, as far as planning is concerned."""

    PENDING = "pending"
    ADMITTED = "admitted"
    FINISHED = "finished"
    INACTIVE = "inactive"


def lifecycle(workload: Mapping[str, Any]) -> Lifecycle:
    """Finished wins over inactive, which wins over admitted; anything else is pending."""
    if is_finished(workload):
        return Lifecycle.FINISHED
    if not is_active(workload):
        return Lifecycle.INACTIVE
    if is_admitted(workload):
        return Lifecycle.ADMITTED
    return Lifecycle.PENDING


def reservation(workload: Mapping[str, Any]) -> QuotaReservation | None:
    """Kueue's quota reservation (``status.admission``) while ``QuotaReserved`` is True."""
    if not holds_quota(workload):
        return None
    admission = map_or_empty(map_or_empty(workload.get("status")).get("admission"))
    cluster_queue = admission.get("clusterQueue")
    if not cluster_queue:
        return None
    flavors: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    for assignment in list_or_empty(admission.get("podSetAssignments")):
        if not isinstance(assignment, dict):
            continue
        name = str(assignment.get("name") or "main")
        flavors[name] = {str(k): str(v) for k, v in map_or_empty(assignment.get("flavors")).items()}
        if isinstance(assignment.get("count"), int) and not isinstance(assignment.get("count"), bool):
            counts[name] = assignment["count"]
    return QuotaReservation(cluster_queue=str(cluster_queue), flavors=flavors, counts=counts)


def is_finished(workload: Mapping[str, Any]) -> bool:
    return condition_true(workload, "Finished")


def is_active(workload: Mapping[str, Any]) -> bool:
    return map_or_empty(workload.get("spec")).get("active") is not False


def is_admitted(workload: Mapping[str, Any]) -> bool:
    return condition_true(workload, "Admitted")


def holds_quota(workload: Mapping[str, Any]) -> bool:
    return condition_true(workload, "QuotaReserved")


def is_evicted(workload: Mapping[str, Any]) -> bool:
    """Kueue is evicting it: ``Evicted`` stays True until quota is reserved again (old pods may run)."""
    return condition_true(workload, "Evicted")


def quota_reserved_since(workload: Mapping[str, Any]) -> datetime | None:
    cond = condition(workload, "QuotaReserved")
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def cluster_queue_of(workload: Mapping[str, Any], local_queues: Mapping[tuple[str, str], str]) -> str | None:
    """The ClusterQueue of a workload: its reservation's, else its LocalQueue's."""
    admission = map_or_empty(map_or_empty(workload.get("status")).get("admission"))
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    m = meta(workload)
    queue = map_or_empty(workload.get("spec")).get("queueName")
    if not isinstance(queue, str):
        return None
    return local_queues.get((str(m.get("namespace", "default")), queue))


def local_queue_index(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for obj in objects:
        if obj.get("kind") == "LocalQueue":
            m = meta(obj)
            cq = map_or_empty(obj.get("spec")).get("clusterQueue")
            if isinstance(cq, str):
                out[(str(m.get("namespace", "default")), str(m.get("name", "")))] = cq
    return out
