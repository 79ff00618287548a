"""Fixtures the component tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import iris_requests


@pytest.fixture(scope="module")
def iris_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of the demo iris model alone (``tests/support/iris_requests.py``), one per test module."""
    return iris_requests.iris_repository(tmp_path_factory.mktemp("iris-only"))
