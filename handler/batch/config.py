"""Batch destinations and defaults, from the environment."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from handler.protocol.settings import BatchSettings


@dataclass(frozen=True)
class BatchConfig:
    """Destinations and defaults, from the environment."""

    results_s3_uri: str = ""
    results_queue_url: str = ""
    output_prefix: str = "output/"
    input_prefix: str = "input/"
    chunk_size: int = 256
    default_model: str | None = None

    @classmethod
    def from_env(cls) -> BatchConfig:
        """``OIP_RESULTS_S3_URI``, ``OIP_RESULTS_QUEUE_URL``, ``OIP_BATCH_OUTPUT_PREFIX``,
        ``OIP_BATCH_INPUT_PREFIX``, ``OIP_BATCH_CHUNK_SIZE``, ``OIP_BATCH_MODEL`` (``BatchSettings``)."""
        return cls(**asdict(BatchSettings.from_env()))
