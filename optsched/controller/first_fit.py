"""A pod without optsched's claim pinned to a DRA slot: when its GPUs cannot be served from another slot's.

A pod that still asks ``nvidia.com/gpu`` (or GPUs through a claim of its
own) on a DRA node is served by kube-scheduler's allocator first-fit: any
free device of the node, including the devices planned for another pod's
optsched claim that is not allocated yet. That claim could then never be
allocated, since it selects exactly its planned UUIDs. Such a pod (the
webhook failed open, its PodSet's slots are mixed, its GPU request could
not be moved) is therefore pinned to a DRA slot only once no other slot of
that node still waits for its claim's devices: every other DRA slot planned
there is bound, or held by a pod that has no claim either (first-fit among
unenforced pods takes nothing promised). Until then it waits gated; it is
pinned by the pass that follows the other slots' binds.

A DRA slot still waits for its claim's devices when its pod is pinned with
an optsched claim and not bound, is being pinned with one in this pass, or
has not been created yet (it may come with a claim), unless no pod gets
claims (``--no-dra-claims``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from optsched.controller.dra_webhook import on_dra
from optsched.controller.views import PodView, WorkloadView

SlotKey = tuple[str, str, str, int]
"""(namespace, plan id, PodSet, slot index)."""


@dataclass(frozen=True)
class FirstFitGuard:
    """Per DRA node, the slots whose claim may still be allocated (their planned devices are promised)."""

    pending: Mapping[str, frozenset[SlotKey]]

    @classmethod
    def of(
        cls,
        records: Mapping[tuple[str, str], WorkloadView],
        groups: Mapping[tuple[str, str, str], Sequence[PodView]],
        claimless: Iterable[SlotKey],
        *,
        claims: bool = True,
    ) -> FirstFitGuard:
        """``groups``: the live pods by (namespace, plan id, PodSet); ``claimless``: the slots given to
        pods without a claim in this pass; ``claims``: pods may get claims at all."""
        unenforced = set(claimless)
        out: dict[str, set[SlotKey]] = {}
        for (namespace, plan_id), view in records.items():
            if view.record is None:
                continue
            for pod_set, slots in view.record.pod_sets.items():
                held = {
                    p.slot_index: p
                    for p in groups.get((namespace, plan_id, pod_set), ())
                    if p.slot_index is not None and not p.gated_by_us
                }
                for slot in slots:
                    key = (namespace, plan_id, pod_set, slot.index)
                    pod = held.get(slot.index)
                    if not on_dra(slot) or key in unenforced:
                        continue
                    if pod is not None and (pod.node is not None or pod.claim_name is None):
                        continue
                    if pod is None and not claims:
                        continue
                    out.setdefault(slot.node, set()).add(key)
        return cls({node: frozenset(keys) for node, keys in out.items()})

    def hazard(self, key: SlotKey, node: str) -> str | None:
        """Why a pod without a claim may not take slot ``key`` on ``node`` yet; None if it may."""
        others = sorted(self.pending.get(node, frozenset()) - {key})
        if not others:
            return None
        _, plan_id, pod_set, index = others[0]
        return (
            f"it asks GPUs without an optsched claim, which kube-scheduler serves first-fit on {node}, where "
            f"slot {pod_set}/{index} of plan {plan_id} still waits for its claim's planned GPUs"
            f"{f' (and {len(others) - 1} more)' if len(others) > 1 else ''}; pinned once they are allocated"
        )
