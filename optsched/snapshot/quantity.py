"""Kubernetes resource quantities, parsed the way the API server reads them.

CPU is kept in millicores and memory in MiB so that the solver works on small
integers. Requests round up and capacities round down, so a plan never
promises more than the node really has.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from optsched.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

MIB = 2**20

MAX_CPU_MILLI = 10**9
"""A million cores: far beyond any node, small enough that sums over a cluster stay exact in the solver."""
MAX_MEMORY_MIB = 2**40
"""An exbibyte."""
MAX_COUNT = 10**6
"""GPUs, MIG slices, pods or shares: no node or pod comes near a million."""


def _bounded(value: int, limit: int, text: object, unit: str) -> int:
    if abs(value) > limit:
        raise InputError(f"{text!r} is beyond what optsched reads (at most {limit}{unit})")
    return value


def parse_quantity(value: object, *, field: str = "") -> Decimal:
    """Parse a Kubernetes quantity ("500m", "16Gi", "1e9", 4) into a Decimal of base units."""
    if isinstance(value, bool):
        raise InputError(f"expected a quantity, got {value!r}", field=field)
    if isinstance(value, int | float):
        return _finite(Decimal(str(value)), value, field)
    if not isinstance(value, str):
        raise InputError(f"expected a quantity such as '4', '500m' or '16Gi', got {value!r}", field=field)
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match:
        raise InputError(f"'{value}' is not a quantity (expected e.g. '4', '500m', '16Gi')", field=field)
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise InputError(f"'{value}' is not a quantity", field=field) from exc
    base = _finite(base, value, field)
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def _finite(number: Decimal, value: object, field: str) -> Decimal:
    """Refuse NaN, infinity and exponents no cluster needs (they would overflow later arithmetic)."""
    if not number.is_finite() or number.adjusted() > 30:
        raise InputError(
            f"{value!r} is not a quantity optsched reads (NaN, infinite or too large)", field=field
        )
    return number


def cpu_milli(value: object, *, field: str = "", round_up: bool = True) -> int:
    """CPU quantity in millicores."""
    milli = parse_quantity(value, field=field) * 1000
    return _bounded(math.ceil(milli) if round_up else math.floor(milli), MAX_CPU_MILLI, value, " millicores")


def memory_mib(value: object, *, field: str = "", round_up: bool = True) -> int:
    """Memory quantity in MiB."""
    mib = parse_quantity(value, field=field) / MIB
    return _bounded(math.ceil(mib) if round_up else math.floor(mib), MAX_MEMORY_MIB, value, " MiB")


def count(value: object, *, field: str = "") -> int:
    """A whole-number quantity such as a GPU count; fractions are an error."""
    number = parse_quantity(value, field=field)
    if number != number.to_integral_value():
        raise InputError(f"'{value}' must be a whole number", field=field)
    return _bounded(int(number), MAX_COUNT, value, "")
