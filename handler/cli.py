"""The ``oip`` command: ``oip serve`` runs the V2 app under uvicorn."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from handler.server import build_app
    from handler.settings import Settings

    settings = Settings.from_env(
        model_repository=args.model_repository,
        max_body_bytes=args.max_body_bytes,
    )
    app = build_app(settings)
    if not args.grpc_port:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log)
        return 0
    import asyncio

    from handler.grpc_server import build_server

    async def serve_both() -> None:
        grpc_server = build_server(app.state.dataplane, settings, f"{args.host}:{args.grpc_port}")
        await grpc_server.start()
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log
        )
        try:
            await uvicorn.Server(config).serve()
        finally:
            await grpc_server.stop(grace=2)

    asyncio.run(serve_both())
    return 0


def _invoke(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    if args.model_repository:
        os.environ["MODEL_REPOSITORY"] = args.model_repository
    from handler.lambda_context import LocalLambdaContext

    event = json.loads(Path(args.event).read_text())
    from handler.http import lambda_handler

    response = lambda_handler(event, LocalLambdaContext())
    print(json.dumps(response, indent=2, ensure_ascii=False))
    return 0


def _batch(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from tqdm import tqdm

    from handler.batch_io import BatchJob, predict_jsonl, predict_npy
    from handler.dataplane import build_dataplane
    from handler.loop import run
    from handler.settings import Settings

    source = Path(args.input)
    output = Path(args.output) if args.output else source.with_name(source.name + ".predictions.jsonl")
    manifest_path = output.with_name(output.name.removesuffix(".jsonl") + ".manifest.json")
    dataplane = build_dataplane(Settings.from_env(model_repository=args.model_repository))
    job = BatchJob(args.model, args.model_version, args.chunk_size, id_prefix=f"{source.name}:")
    with source.open("rb") as reader, output.open("wb") as writer, tqdm(unit="row", disable=args.quiet) as bar:
        if source.suffix == ".npy":
            summary = run(predict_npy(dataplane, job, reader, writer.write, bar.update))
        else:
            summary = run(predict_jsonl(dataplane, job, reader, writer.write, bar.update))
    manifest = summary.manifest(input=str(source), output=str(output), chunk_size=args.chunk_size)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{summary.rows_in} rows in, {summary.rows_out} out, {summary.errors} errors -> {output} ({manifest_path})")
    return 1 if summary.errors else 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``oip``."""
    parser = argparse.ArgumentParser(prog="oip", description="Open Inference Protocol (V2) server for ONNX models.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve a model repository over HTTP")
    serve.add_argument(
        "--model-repository",
        help="directory or s3://bucket/prefix [env MODEL_REPOSITORY; default: the demo repository]",
    )
    serve.add_argument("--host", default=os.environ.get("OIP_HOST", "127.0.0.1"), help="[env OIP_HOST]")
    serve.add_argument("--port", type=int, default=int(os.environ.get("OIP_PORT", "8000")), help="[env OIP_PORT]")
    serve.add_argument("--max-body-bytes", type=int, help="[env OIP_MAX_BODY_BYTES; default 6 MiB]")
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=int(os.environ.get("OIP_GRPC_PORT", "0")),
        help="also serve the V2 gRPC API on this port (needs oip-serverless[grpc]) [env OIP_GRPC_PORT; default off]",
    )
    serve.add_argument("--log-level", default=os.environ.get("OIP_LOG_LEVEL", "info"))
    serve.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True)
    serve.set_defaults(run=_serve)

    invoke = commands.add_parser(
        "invoke", help="run a Lambda event file through the real handler and print the response (like sam local invoke)"
    )
    invoke.add_argument("event", help="event JSON file, e.g. events/http-api/infer-json.json")
    invoke.add_argument("--model-repository", help="[env MODEL_REPOSITORY; default: the demo repository]")
    invoke.set_defaults(run=_invoke)

    batch = commands.add_parser("batch", help="predict a .jsonl file of V2 requests, or a .npy array, into JSON Lines")
    batch.add_argument("input", help="a .jsonl file (one V2 inference request per line) or a .npy array")
    batch.add_argument("--model", help="model name (a .jsonl line may name its own with 'model_name')")
    batch.add_argument("--model-version", help="model version (default: the model's default version)")
    batch.add_argument("--output", help="output .jsonl (default: INPUT.predictions.jsonl, manifest beside it)")
    batch.add_argument("--chunk-size", type=int, default=256, help="rows predicted together (default 256)")
    batch.add_argument("--model-repository", help="[env MODEL_REPOSITORY; default: the demo repository]")
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    batch.set_defaults(run=_batch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oip`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
