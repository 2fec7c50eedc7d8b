"""Trust stores: where an agent records that the user trusted our hooks (some agents run a hook only
then). An integration names its store in ``trust.store``; the store's plug-in reads the agent's own
records and tells whether our hooks will run. Registry group: ``agent_collector.trust_stores``."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from collector.deploy.codex_trust import PLUGIN as CODEX_TRUST
from collector.deploy.model import TrustResult
from collector.paths import Paths
from collector.registry import Registry

TrustCheck = Callable[[Path], TrustResult]  # the deployed hooks file -> is it trusted
TrustStoreBuilder = Callable[[dict[str, Any], Paths], TrustCheck]  # (the integration's trust config, paths)


@cache
def trust_stores() -> Registry[TrustStoreBuilder]:
    return Registry("trust store", [CODEX_TRUST], group="agent_collector.trust_stores")
