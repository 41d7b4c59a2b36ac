"""Settings of the Gotenberg-compatible door (`services/gateway/gotenberg/`).

A base of `Settings` (its fields are `Settings`' fields, read the same way from
`PRESSROOM_*` variables), kept apart so the door's settings are read in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.settingvalues import float_in, int_in, var


@dataclass(frozen=True)
class GotenbergSettings:
    """Where the Gotenberg-compatible routes are served, and how long they wait."""

    gotenberg_timeout: float = var(
        "PRESSROOM_GOTENBERG_TIMEOUT",
        30.0,
        float_in(1, 3600),
        "gateway: seconds a Gotenberg-compatible request waits for its job (then 503 naming"
        " it; the job goes on)",
    )

    gotenberg_port: int = var(
        "PRESSROOM_GOTENBERG_PORT",
        0,
        int_in(0, 65535),
        "gateway: a port of their own for the Gotenberg-compatible routes, which the API's "
        "port then does not serve (0: on the API's port, beside it)",
    )

    def gotenberg_apart(self, api_port: int) -> bool:
        """Whether the compatible routes have a port of their own, not the API's."""
        return self.gotenberg_port not in (0, api_port)
