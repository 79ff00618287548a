"""The REST app: ``create_serving_app`` (what ``oip serve`` and Lambda run), ``create_app`` (the same app as a
FastAPI application) and one module per route family (health, metadata, inference,
repository), the HTTP body rules, the error handlers, the OpenAPI document, and the check of the HTTP events Lambda
hands the app through Mangum (``lambda_event``).

May import: codecs, observability, protocol, adapters. Never grpc or batch.
"""
