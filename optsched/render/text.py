"""Plain-text building blocks: aligned tables and compact GPU index notation.

Kept free of any plan knowledge so the table and the comparison views share
one column layout and one way of writing ``h100-03[0-3]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ANSI = {
    "bold": "\033[1m",
    "dim": "\033[2m",
    "green": "\033[32m",
    "yellow": "\033[33m",
    "red": "\033[31m",
    "cyan": "\033[36m",
}
_RESET = "\033[0m"
_ANSI_RE = re.compile(r"\033\[[0-9;]*m")


def paint(text: str, style: str, enabled: bool) -> str:
    """Wrap ``text`` in an ANSI style when colour is enabled (a TTY), else return it unchanged."""
    if not enabled or not text:
        return text
    return f"{ANSI[style]}{text}{_RESET}"


def visible_len(text: str) -> int:
    """Length as a terminal shows it: colour codes take no room."""
    return len(_ANSI_RE.sub("", text))


def index_ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``"0-3,6"``: GPU indices as a person writes them."""
    ordered = sorted(set(indices))
    if not ordered:
        return ""
    parts: list[str] = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


@dataclass(frozen=True)
class NodeGpus:
    """GPUs one workload takes on one node: known indices, or a count of unknown ones."""

    node: str
    indices: tuple[int, ...] = ()
    unknown: int = 0
    pods: int = 1

    def spec(self) -> str:
        parts = []
        if self.indices:
            parts.append(index_ranges(self.indices))
        if self.unknown:
            parts.append(f"any {self.unknown}")
        return f"[{','.join(parts)}]" if parts else ""


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compact_nodes(groups: Sequence[NodeGpus]) -> list[str]:
    """Node placements as short tokens, runs of numbered nodes with equal GPU sets merged.

    ``h100-01[0-7] h100-02[0-7] h100-03[0-7]`` becomes ``h100-01..03[0-7]`` so
    a 16-node gang still fits on a line.
    """
    tokens: list[str] = []
    run: list[tuple[str, str, int, str]] = []  # (prefix, digits, number, spec)

    def flush() -> None:
        if not run:
            return
        prefix, first_digits, _, spec = run[0]
        if len(run) == 1:
            tokens.append(f"{prefix}{first_digits}{spec}")
        else:
            tokens.append(f"{prefix}{first_digits}..{run[-1][1]}{spec}")
        run.clear()

    for group in groups:
        spec = group.spec()
        match = _NUMBERED.match(group.node)
        if match is None:
            flush()
            tokens.append(f"{group.node}{spec}")
            continue
        prefix, digits = match.group(1), match.group(2)
        number = int(digits)
        if run:
            last_prefix, last_digits, last_number, last_spec = run[-1]
            contiguous = (
                prefix == last_prefix
                and len(digits) == len(last_digits)
                and number == last_number + 1
                and spec == last_spec
            )
            if not contiguous:
                flush()
        run.append((prefix, digits, number, spec))
    flush()
    return tokens


def wrap_tokens(tokens: Sequence[str], width: int) -> str:
    """Join tokens with spaces, breaking lines before ``width`` (a token is never split)."""
    lines: list[str] = []
    current = ""
    for token in tokens:
        candidate = f"{current} {token}" if current else token
        if current and len(candidate) > width:
            lines.append(current)
            current = token
        else:
            current = candidate
    if current:
        lines.append(current)
    return "\n".join(lines)


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Iterable[int] = (),
    indent: str = "  ",
) -> str:
    """Columns aligned on the widest cell; cells may hold several lines.

    ``right`` lists the column numbers to right-align (numbers read better so).
    The last column is never padded, so no line ends in spaces.
    """
    right_cols = set(right)
    cells = [[str(c).split("\n") for c in row] for row in rows]
    widths = [visible_len(h) for h in headers]
    for row in cells:
        for col, lines in enumerate(row):
            widths[col] = max(widths[col], *(visible_len(line) for line in lines))

    def line(values: Sequence[str]) -> str:
        out = []
        last = len(values) - 1
        for col, value in enumerate(values):
            pad = widths[col] - visible_len(value)
            if col in right_cols:
                out.append(" " * pad + value)
            elif col == last:
                out.append(value)
            else:
                out.append(value + " " * pad)
        return (indent + "  ".join(out)).rstrip()

    text = [line(headers)]
    for row in cells:
        height = max(len(lines) for lines in row)
        for i in range(height):
            text.append(line([lines[i] if i < len(lines) else "" for lines in row]))
    return "\n".join(text)


def fmt_gpus(value: float) -> str:
    """GPUs as an integer when whole, else with up to two decimals (shares)."""
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def fmt_seconds(value: float) -> str:
    if value < 0.01:
        return f"{value * 1000:.1f} ms" if value > 0 else "0 s"
    if value < 10:
        return f"{value:.2f} s"
    return f"{value:.1f} s"


def fmt_share(part: int, whole: int) -> str:
    """``3/4 (75%)``, or ``n/a`` when there is nothing to count."""
    if whole == 0:
        return "n/a"
    return f"{part}/{whole} ({100 * part / whole:.0f}%)"
