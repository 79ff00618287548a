#!/bin/sh
# One image for every platform, chosen by the environment alone (docs/serving.md, "The container image"):
# - AWS Lambda (container image): the runtime API is set -> the Lambda runtime interface client runs the handler;
# - SageMaker starts containers as `docker run IMAGE serve` -> `oip serve` on SageMaker's contract;
# - otherwise `oip serve`, which reads Vertex AI's AIP_* variables when present (handler/config/platform.py).
set -e
if [ -n "${AWS_LAMBDA_RUNTIME_API:-}" ]; then
    exec python -m awslambdaric handler.http.lambda_handler
fi
if [ "${1:-}" = "serve" ]; then
    shift
    export OIP_PLATFORM="${OIP_PLATFORM:-sagemaker}"
fi
exec oip serve "$@"
