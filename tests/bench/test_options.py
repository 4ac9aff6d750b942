"""Policy lists are read the same way by every benchmark verb."""

from __future__ import annotations

import pytest

from optsched.bench.options import TOPOLOGY_POLICIES, TRACE_POLICIES, parse_policies
from optsched.errors import InputError


def test_policy_list_is_trimmed_and_lower_cased() -> None:
    assert parse_policies(" FGD, bestfit ,,", TRACE_POLICIES) == ["fgd", "bestfit"]
    assert parse_policies("tas", TOPOLOGY_POLICIES) == ["tas"]


@pytest.mark.parametrize(("text", "message"), [("random", "unknown policy random"), (" , ", "(none)")])
def test_unknown_or_empty_policy_list_names_the_option(text: str, message: str) -> None:
    with pytest.raises(InputError, match="--policies") as caught:
        parse_policies(text, TOPOLOGY_POLICIES)
    assert message in str(caught.value)
