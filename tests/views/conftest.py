"""Fixtures the views' tests share."""

from __future__ import annotations

import pytest

from streaming.views.metrics import serve


@pytest.fixture
def endpoint():
    """The Prometheus endpoint on a free loopback port: ``(metrics, url)``; shut down after the test."""
    server, url = serve(0)
    yield server.metrics, url
    server.shutdown()
    server.server_close()
