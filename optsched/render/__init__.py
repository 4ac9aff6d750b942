"""Renderers: pure functions from ``(snapshot, plan)`` to text.

Each output format lives in its own module so the CLI can pick one by name
without the others' dependencies; none of them touches the network or disk.
"""

from __future__ import annotations

FORMATS: tuple[str, ...] = ("table", "json", "yaml", "html")
