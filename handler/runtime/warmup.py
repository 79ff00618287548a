"""Run each default model version once on zeros, so first requests (and SnapStart snapshots) find warm sessions."""

from __future__ import annotations

import logging

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import V2Error
from adapters.types import InferCall, Tensor
from handler.protocol.dataplane import DataPlane

logger = logging.getLogger(__name__)


def _zeros(datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    if datatype == "BYTES":
        return np.full(shape, "", dtype=object)
    return np.zeros(shape, dtype=numpy_dtype(datatype))


async def warm_up(dataplane: DataPlane) -> list[str]:
    """Infer once per model on zero inputs (variable dims as 1); returns the models warmed."""
    warmed = []
    for name in dataplane.repository.names():  # local models only: Triton warms its own
        try:
            metadata = await dataplane.model_metadata(name)
            inputs = tuple(
                Tensor(spec.name, spec.datatype, shape, _zeros(spec.datatype, shape))
                for spec in metadata.inputs
                for shape in [tuple(1 if dim < 0 else dim for dim in spec.shape)]
            )
            await dataplane.infer(name, None, InferCall(inputs))
            warmed.append(name)
        except V2Error as exc:
            logger.warning("warm-up of model %s skipped: %s", name, exc)
    return warmed
