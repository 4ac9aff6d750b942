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


def parse_quantity(value: object, *, field: str = "") -> Decimal:
    """Parse a Kubernetes quantity ("500m", "16Gi", "1e9", 4) into a Decimal of base units."""
    if isinstance(value, bool):
        raise InputError(f"expected a quantity, got {value!r}", field=field)
    if isinstance(value, int | float):
        return Decimal(str(value))
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
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def cpu_milli(value: object, *, field: str = "", round_up: bool = True) -> int:
    """CPU quantity in millicores."""
    milli = parse_quantity(value, field=field) * 1000
    return math.ceil(milli) if round_up else math.floor(milli)


def memory_mib(value: object, *, field: str = "", round_up: bool = True) -> int:
    """Memory quantity in MiB."""
    mib = parse_quantity(value, field=field) / MIB
    return math.ceil(mib) if round_up else math.floor(mib)


def count(value: object, *, field: str = "") -> int:
    """A whole-number quantity such as a GPU count; fractions are an error."""
    number = parse_quantity(value, field=field)
    if number != number.to_integral_value():
        raise InputError(f"'{value}' must be a whole number", field=field)
    return int(number)
