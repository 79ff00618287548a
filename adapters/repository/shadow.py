"""A model's shadow version, from config.pbtxt's ``parameters``: the candidate that receives a sampled copy of the
default version's requests on ``oip serve`` (``handler/inference/shadow.py``).

``shadow_version`` names the candidate (a served version other than the default); ``shadow_rate`` (0 to 1,
default 1) is the share of the default's requests it receives; ``shadow_timeout_ms`` (default 1000) bounds each
shadow run. A wrong value makes the model unavailable with the parameter named, as a wrong ``default_version``
does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapters.errors import InvalidInput

SHADOW_VERSION = "shadow_version"
SHADOW_RATE = "shadow_rate"
SHADOW_TIMEOUT_MS = "shadow_timeout_ms"
DEFAULT_TIMEOUT_MS = 1000.0


@dataclass(frozen=True, slots=True)
class ShadowPlan:
    """Where a model's default version's requests are copied, how often, and how long a copy may run."""

    version: str
    rate: float = 1.0
    timeout_s: float = DEFAULT_TIMEOUT_MS / 1000


def shadow_plan(model: str, parameters: Mapping[str, str], versions: Sequence[str], default: str) -> ShadowPlan | None:
    """The model's ``ShadowPlan``, None without ``shadow_version``; InvalidInput naming the parameter otherwise."""
    version = parameters.get(SHADOW_VERSION)
    if version is None or version == "":
        for key in (SHADOW_RATE, SHADOW_TIMEOUT_MS):
            if key in parameters:
                raise InvalidInput(f"model '{model}': {key} is set without {SHADOW_VERSION}")
        return None
    if version not in versions:
        raise InvalidInput(f"model '{model}': {SHADOW_VERSION} {version} is not among {list(versions)}")
    if version == default:
        raise InvalidInput(f"model '{model}': {SHADOW_VERSION} {version} is the default version itself")
    rate = _number(model, parameters, SHADOW_RATE, 1.0)
    if not 0 <= rate <= 1:
        raise InvalidInput(f"model '{model}': {SHADOW_RATE} must be from 0 to 1, not {parameters[SHADOW_RATE]}")
    timeout_ms = _number(model, parameters, SHADOW_TIMEOUT_MS, DEFAULT_TIMEOUT_MS)
    if not timeout_ms > 0:
        raise InvalidInput(f"model '{model}': {SHADOW_TIMEOUT_MS} must be above 0, not {parameters[SHADOW_TIMEOUT_MS]}")
    return ShadowPlan(version, rate, timeout_ms / 1000)


def _number(model: str, parameters: Mapping[str, str], key: str, default: float) -> float:
    text = parameters.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"model '{model}': {key} must be a number, not '{text}'") from None
    if not math.isfinite(value):
        raise InvalidInput(f"model '{model}': {key} must be a finite number, not '{text}'")
    return value
