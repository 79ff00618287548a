"""Transports and entry points: the FastAPI V2 app, the Lambda handlers and the CLI."""
