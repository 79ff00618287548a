"""oip-serverless: the Open Inference Protocol (V2) over AWS Lambda, `oip serve` and batch.

Rooms, imports pointing down only (tests/unit/test_layers.py runs the contracts in pyproject.toml):

    entry points   http.py (Lambda HTTP), batch (Lambda batch events), cli (`oip`), server.py (`oip serve` app),
                   rollout (CodeDeploy traffic hooks)
    transports     rest/, grpc/, batch/        never import each other
    wire & ops     codecs/, observability/     never import each other
    core           protocol/                   the data plane every transport calls; knows no transport
    backends       adapters/                   never import handler
"""

#: The package version (pyproject.toml reads it from here): known without the package's metadata, which is absent
#: where the code is copied rather than installed (the Lambda package).
__version__ = "0.1.0"
