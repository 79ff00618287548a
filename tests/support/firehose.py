"""A Firehose delivery stream to S3 in moto's server (the request-logging tests' destination), and the records it
delivered."""

from __future__ import annotations

import json
from typing import Any

import boto3


def firehose_to_s3(bucket: str, stream: str) -> None:
    """A new ``bucket``, and a DirectPut delivery ``stream`` that delivers to it under ``requests/``."""
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("firehose").create_delivery_stream(
        DeliveryStreamName=stream,
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "BucketARN": f"arn:aws:s3:::{bucket}",
            "RoleARN": "arn:aws:iam::123456789012:role/firehose",
            "Prefix": "requests/",
        },
    )


def delivered_records(bucket: str) -> list[dict[str, Any]]:
    """Every JSON line of every object in ``bucket``: the records the stream delivered."""
    s3 = boto3.client("s3")
    records = []
    for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode()
        records += [json.loads(line) for line in body.splitlines() if line.strip()]
    return records
