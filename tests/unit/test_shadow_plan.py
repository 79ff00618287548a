"""config.pbtxt's shadow parameters (adapters/repository/shadow.py): the plan they give, and one message naming
the parameter for each wrong value."""

# covers: adapters/repository/shadow.py

from __future__ import annotations

import pytest

from adapters.errors import InvalidInput
from adapters.repository.shadow import ShadowPlan, shadow_plan

VERSIONS = ("1", "2", "3")


def test_no_shadow_version_is_no_plan() -> None:
    assert shadow_plan("m", {"default_version": "1"}, VERSIONS, "1") is None


def test_the_plan_defaults_to_every_request_within_one_second() -> None:
    assert shadow_plan("m", {"shadow_version": "2"}, VERSIONS, "1") == ShadowPlan("2", 1.0, 1.0)
    given = {"shadow_version": "3", "shadow_rate": "0.25", "shadow_timeout_ms": "50"}
    assert shadow_plan("m", given, VERSIONS, "1") == ShadowPlan("3", 0.25, 0.05)


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"shadow_version": "9"}, "model 'm': shadow_version 9 is not among ['1', '2', '3']"),
        ({"shadow_version": "1"}, "model 'm': shadow_version 1 is the default version itself"),
        ({"shadow_version": "2", "shadow_rate": "1.5"}, "model 'm': shadow_rate must be from 0 to 1, not 1.5"),
        ({"shadow_version": "2", "shadow_rate": "half"}, "model 'm': shadow_rate must be a number, not 'half'"),
        ({"shadow_version": "2", "shadow_rate": "nan"}, "model 'm': shadow_rate must be a finite number, not 'nan'"),
        ({"shadow_version": "2", "shadow_timeout_ms": "0"}, "model 'm': shadow_timeout_ms must be above 0, not 0"),
        ({"shadow_rate": "0.5"}, "model 'm': shadow_rate is set without shadow_version"),
    ],
)
def test_a_wrong_value_is_one_message_naming_the_parameter(parameters: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        shadow_plan("m", parameters, VERSIONS, "1")
    assert str(raised.value) == message
