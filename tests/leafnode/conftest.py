"""Fixtures of the leaf node tests: each side-by-side test runs once per setup."""

from __future__ import annotations

import pytest

from leafnode.topology import SETUP_IDS, SETUPS


@pytest.fixture(params=SETUPS, ids=SETUP_IDS)
def setup(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(hub kind, leaf kind): "go" for nats-server, "py" for pynatsd."""
    return tuple(request.param)  # type: ignore[return-value]
