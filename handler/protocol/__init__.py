"""The transport-neutral core: the DataPlane that REST, gRPC and batch all call, limits, and the one table from our
errors to HTTP status and gRPC code. Settings, cores and the platform are handler/config/'s.

May import: handler.config, adapters. Never a transport (no FastAPI, no grpc) and no codec: it speaks domain types only.
"""
