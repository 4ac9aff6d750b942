from decimal import Decimal

import pytest

from optsched.errors import InputError
from optsched.snapshot.quantity import count, cpu_milli, memory_mib, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4", Decimal(4)),
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1e3", Decimal(1000)),
        ("2k", Decimal(2000)),
        (8, Decimal(8)),
        ("1.5", Decimal("1.5")),
    ],
)
def test_parses_kubernetes_quantities(text: object, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


def test_cpu_and_memory_units_round_in_the_safe_direction() -> None:
    assert cpu_milli("250m") == 250
    assert cpu_milli("1.0005") == 1001
    assert cpu_milli("1.0005", round_up=False) == 1000
    assert memory_mib("1Gi") == 1024
    assert memory_mib("1500000") == 2
    assert memory_mib("1500000", round_up=False) == 1


@pytest.mark.parametrize("bad", ["12 cores", "", "1.2.3", "Gi", True, None, [1]])
def test_rejects_what_is_not_a_quantity(bad: object) -> None:
    with pytest.raises(InputError, match="quantity"):
        parse_quantity(bad, field="status.allocatable.cpu")


def test_counts_must_be_whole() -> None:
    assert count("8") == 8
    with pytest.raises(InputError, match="whole number"):
        count("0.5")
