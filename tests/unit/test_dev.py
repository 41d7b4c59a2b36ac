"""`pressroom dev`'s choices that need no servers."""

from __future__ import annotations

from services.core.settings import Settings
from services.dev import log_size_for

GIB = 2**30


def test_the_embedded_log_fits_a_small_disk_and_keeps_the_default_on_a_big_one():
    assert log_size_for(100 * GIB) == Settings.stream_max_bytes
    assert log_size_for(4 * GIB) == GIB  # a quarter: NATS would refuse 75 % of it and more
    assert log_size_for(10 * 2**20) == 64 * 2**20  # never below a useful minimum
