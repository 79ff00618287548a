"""Batch destinations and defaults: the settings reader's ``BatchSettings``, under the name the batch room uses."""

from __future__ import annotations

from handler.config.lambda_settings import BatchSettings as BatchConfig

__all__ = ["BatchConfig"]
