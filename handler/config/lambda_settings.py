"""What only the Lambda functions read: ``LambdaSettings`` for the Lambda entry points (handler/http.py,
handler/batch/), ``BatchSettings`` for the batch function's destinations. Declared as ``Settings`` is
(handler/config/settings.py), each field with its variable, reader, default and meaning."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from handler.config.variables import Flag, Integer, Reader, SettingsError, Text, read_declared, setting

TEXT = Text()
FLAG = Flag()
POSITIVE = Integer(minimum=1)


@dataclass(frozen=True)
class PowertoolsFlag(Reader):
    """A Powertools switch as Powertools reads it (``strtobool``: also ``y``, ``t``, ``n`` and ``f``)."""

    def parse(self, variable: str, value: str) -> bool:
        from aws_lambda_powertools.shared.functions import strtobool

        try:
            return strtobool(value)
        except ValueError:
            raise SettingsError(variable, value, "true or false, as Powertools reads it") from None


@dataclass(frozen=True)
class LambdaSettings:
    """What only the Lambda entry points read (handler/http.py, handler/batch/)."""

    tracing: bool = setting("OIP_TRACING", False, FLAG, "AWS X-Ray subsegments")
    warm_up: bool = setting("OIP_WARM_UP", True, FLAG, "run each default version once on zeros in the init phase")
    service_name: str = setting(
        "POWERTOOLS_SERVICE_NAME", "oip-serverless", TEXT, "Powertools' ``service`` key on log lines and metrics"
    )
    log_event: bool = setting(
        "POWERTOOLS_LOGGER_LOG_EVENT", False, PowertoolsFlag(), "log each event (Powertools' variable and spellings)"
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LambdaSettings:
        """From ``env`` (this process's environment when None); SettingsError for a value not accepted."""
        return cls(**read_declared(cls, os.environ if env is None else env))


@dataclass(frozen=True)
class BatchSettings:
    """The batch function's destinations and defaults (``BatchConfig`` in handler/batch/config.py)."""

    results_s3_uri: str = setting("OIP_RESULTS_S3_URI", "", TEXT, "where SQS requests' results go")
    results_queue_url: str = setting("OIP_RESULTS_QUEUE_URL", "", TEXT, "the results queue")
    output_prefix: str = setting("OIP_BATCH_OUTPUT_PREFIX", "output/", TEXT, "where files are written")
    input_prefix: str = setting("OIP_BATCH_INPUT_PREFIX", "input/", TEXT, "where files are read")
    chunk_size: int = setting("OIP_BATCH_CHUNK_SIZE", 256, POSITIVE, "rows predicted together")
    default_model: str | None = setting("OIP_BATCH_MODEL", None, TEXT, "the model when a request or file names none")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BatchSettings:
        """From ``env`` (this process's environment when None); SettingsError for a value not accepted."""
        return cls(**read_declared(cls, os.environ if env is None else env))
