"""Fixtures of the deploy tests."""

from __future__ import annotations

import pytest

from tests.deploy.podman import build_image


@pytest.fixture(scope="session")
def image() -> str:
    """The project's image, built from the working tree once per session."""
    return build_image()
