"""Unexpected exceptions (bugs, or a library failing in a way nobody translated): the whole story goes to the log
under a correlation id, and the client gets a generic message carrying only that id, on every transport."""

from __future__ import annotations

import logging
import secrets


def report_unexpected(logger: logging.Logger, where: str) -> str:
    """Log the exception being handled (call it in an ``except`` block) under a new error id; the client's message."""
    error_id = secrets.token_hex(8)
    logger.exception("unhandled error %s %s", error_id, where)
    return f"internal server error (error id {error_id}); the server log has the details"
