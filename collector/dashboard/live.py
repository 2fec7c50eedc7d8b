"""The dashboard's route for the daemon's ingest server, built with what it needs (no Service)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.config import Config
from collector.dashboard.routes import DashboardRoute
from collector.exporters.usage import store_settings
from collector.ingest.secret import ensure_token
from collector.paths import Paths
from collector.usage.store import store_file
from collector.util.timezones import local_zone


def dashboard_route(paths: Paths, config: Config, snapshot: Callable[[], dict[str, Any]]) -> DashboardRoute:
    """The route, and the per-user secret it checks (made now when missing)."""
    ensure_token(paths)
    store = store_file(paths.data_dir, store_settings(config))
    return DashboardRoute(paths, store, snapshot, bool(config.content.capture), local_zone,
                          config.prices)
