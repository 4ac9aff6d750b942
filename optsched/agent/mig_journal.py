"""The MIG apply journal: a checkpoint written durably before any instance is touched.

A MIG apply destroys and creates GPU instances one call at a time; a crash in
between leaves a GPU in neither layout. So before the first call the agent
writes, next to its other state, what each changed GPU held (the checkpoint),
what it is meant to hold, and then its progress. A journal found at start-up
means an apply was interrupted: the agent restores the checkpoint
(``optsched.agent.mig_apply.recover``). Every write goes to a temporary file
that is flushed to disk and then renamed over the old one, so a crash leaves
either the old journal or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

JOURNAL_KIND = "optsched-mig-apply-journal"


class JournalError(Exception):
    """A journal file exists but cannot be read: the GPUs' MIG state is unknown."""


@dataclass(frozen=True, order=True)
class JournalSlot:
    """One GPU instance as the journal keeps it: its profile, start and size in memory slices."""

    profile: str
    start: int
    size: int


@dataclass(frozen=True)
class Journal:
    """An apply in progress: per changed GPU the layout before and the layout wanted, and how far it got."""

    checkpoint: Mapping[int, tuple[JournalSlot, ...]]
    desired: Mapping[int, tuple[JournalSlot, ...]]
    touched: tuple[int, ...] = ()
    """GPUs the apply has begun changing (recorded before their first call)."""
    done: tuple[int, ...] = ()
    """GPUs changed and verified."""


def write_json_durably(path: Path, value: object) -> None:
    """Write ``value`` as JSON to ``path`` atomically: temporary file, flush, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(value, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make a rename or unlink in ``directory`` durable where the platform allows opening a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _slots_json(slots: Mapping[int, tuple[JournalSlot, ...]]) -> dict[str, list[dict[str, object]]]:
    return {
        str(gpu): [{"profile": s.profile, "start": s.start, "size": s.size} for s in gpu_slots]
        for gpu, gpu_slots in sorted(slots.items())
    }


def write_journal(path: Path, journal: Journal) -> None:
    write_json_durably(
        path,
        {
            "kind": JOURNAL_KIND,
            "version": 1,
            "checkpoint": _slots_json(journal.checkpoint),
            "desired": _slots_json(journal.desired),
            "touched": list(journal.touched),
            "done": list(journal.done),
        },
    )


def delete_journal(path: Path) -> None:
    path.unlink(missing_ok=True)
    _sync_directory(path.parent)


def read_journal(path: Path) -> Journal | None:
    """The journal at ``path``; None when there is none; :class:`JournalError` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"MIG apply journal {path} cannot be read: {exc}") from exc
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("kind") != JOURNAL_KIND or raw.get("version") != 1:
            raise ValueError(f"expected kind {JOURNAL_KIND} version 1")
        return Journal(
            checkpoint=_read_slots(raw["checkpoint"]),
            desired=_read_slots(raw["desired"]),
            touched=_read_gpus(raw["touched"]),
            done=_read_gpus(raw["done"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise JournalError(f"MIG apply journal {path} is not a journal optsched wrote: {exc}") from exc


def _read_gpus(raw: object) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(type(g) is int for g in raw):
        raise ValueError("expected a list of GPU indices")
    return tuple(raw)


def _read_slots(raw: object) -> dict[int, tuple[JournalSlot, ...]]:
    if not isinstance(raw, dict):
        raise ValueError("expected a map of GPU index to instances")
    out = {}
    for gpu, entries in raw.items():
        if not isinstance(entries, list):
            raise ValueError(f"GPU {gpu}: expected a list of instances")
        slots = []
        for entry in entries:
            profile, start, size = entry["profile"], entry["start"], entry["size"]
            if not isinstance(profile, str) or type(start) is not int or type(size) is not int:
                raise ValueError(f"GPU {gpu}: expected {{profile: str, start: int, size: int}}, got {entry}")
            slots.append(JournalSlot(profile, start, size))
        out[int(gpu)] = tuple(slots)
    return out
