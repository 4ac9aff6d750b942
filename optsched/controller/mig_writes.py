"""Sends the MIG layout decisions: one patch per node, counted and announced once it went through.

Each :class:`~optsched.controller.mig_decide.NodeMigWrite` is one JSON merge
patch of the ``NodeGPUs`` object carrying its uid and the resourceVersion the
decision was made on: the whole ``spec.migLayout`` list (merge patches replace
lists, so the other GPUs' entries go back as read) and our record annotation.
A node agent or a person that changed the object meanwhile makes it fail with
409; nothing of it is applied, and the next cycle decides again on a fresh
read. The outcomes it carries are counted and its Events sent only after it
was written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from optsched.controller.metrics import Metrics
from optsched.controller.mig_decide import MigDecisions, NodeMigWrite
from optsched.kube.client import ApiError
from optsched.kube.writer import Writer
from optsched.model.events import Event
from optsched.model.names import NODE_GPUS_API, NODE_GPUS_PLURAL

log = logging.getLogger("optsched.controller")


class MigWriter:
    """Writes layout changes onto ``NodeGPUs`` objects (only ever their spec and our annotation)."""

    def __init__(self, writer: Writer, metrics: Metrics, *, on_stale: Callable[[], None]) -> None:
        self.writer = writer
        self.metrics = metrics
        self.on_stale = on_stale

    def observe(self, decisions: MigDecisions) -> None:
        self.metrics.mig_in_flight.set(decisions.in_flight)
        self.metrics.mig_waiting.set(len(decisions.holds))

    async def write(self, write: NodeMigWrite) -> tuple[str | None, tuple[Event, ...]]:
        """Send one node's patch: (an error line or None, the Events to send once it went through)."""
        try:
            await self.writer.merge_patch(NODE_GPUS_API, NODE_GPUS_PLURAL, write.node, write.patch())
        except ApiError as exc:
            if exc.conflict:
                self.on_stale()
                log.info(
                    "NodeGPUs %s changed before its MIG layout write (%s); decided again", write.node, exc
                )
            else:
                log.warning(
                    "MIG layout write on NodeGPUs %s failed (%s); retried next cycle", write.node, exc
                )
            return f"mig-layout {write.node}: {exc}", ()
        for outcome, gpu in write.outcomes:
            self.metrics.mig_changes.labels(outcome).inc()
            log.info("MIG layout change %s: node %s GPU %d", outcome, write.node, gpu)
        return None, write.events
