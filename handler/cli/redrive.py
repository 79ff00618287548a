"""``oip redrive QUEUE_URL``: predict again the S3 files whose batch invocations failed, from the batch
function's on-failure queue (template output ``BatchFailedFilesQueueUrl``)."""

from __future__ import annotations

import argparse
import sys

from handler.cli.errors import CliError


def redrive(args: argparse.Namespace) -> int:
    """Re-drive the queue's records; 1 when any record failed again (it stays on the queue)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from handler.batch.config import BatchConfig
    from handler.batch.redrive import redrive_queue
    from handler.batch.service import batch_service
    from handler.runtime import container
    from handler.runtime.startup import StartupFailure

    container.configure(model_repository=args.model_repository)
    try:
        service = batch_service()
    except StartupFailure as failure:
        raise CliError(failure.line(container.settings().platform.repository_options())) from None

    try:
        report = redrive_queue(args.queue_url, BatchConfig.from_env(), service, args.max_records)
    except (BotoCoreError, ClientError) as exc:
        raise CliError(f"{args.queue_url}: {exc}") from None
    for uri in report.predicted:
        print(f"predicted {uri}", file=sys.stderr)
    for uri in report.skipped:
        print(f"already predicted {uri}", file=sys.stderr)
    for message_id, error in report.failed:
        print(f"record {message_id} failed again (left on the queue): {error}", file=sys.stderr)
    print(
        f"oip redrive: {len(report.predicted)} predicted, {len(report.skipped)} already done, "
        f"{len(report.failed)} failed",
        file=sys.stderr,
    )
    return 1 if report.failed else 0
