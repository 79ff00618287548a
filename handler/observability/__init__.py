"""Per-request telemetry: CloudWatch EMF metrics, X-Ray and OpenTelemetry spans, Prometheus metrics and sampled
request logging.

May import: protocol, adapters. Never a transport or a codec.
"""
