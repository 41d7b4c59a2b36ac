"""What the tests of the Gotenberg form routes share: a stack whose jobs may take as long
as a loaded machine needs, and a tiny image for the pages their servers answer.

A test module takes the fixture by importing it (it overrides `tests/conftest.py`'s
`settings` for that module only):

    from tests.integration.gotenberg_forms import settings  # noqa: F401  (a fixture)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.core.runtime.settings import Settings

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
"""A 1x1 transparent PNG."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A wait for each job long enough for a loaded machine: it only guards against hangs."""
    return replace(settings, gotenberg_timeout=300.0)
