"""The local time zone: ``TZ``, else the zone ``/etc/localtime`` links to, else UTC (an unknown name too),
with the name a report prints beside its times."""

from __future__ import annotations

import os
from datetime import tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def local_zone() -> tuple[tzinfo, str]:
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            target = os.readlink("/etc/localtime")
            name = target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else ""
        except OSError:
            name = ""
    try:
        return (ZoneInfo(name), name) if name else (ZoneInfo("UTC"), "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC"), "UTC"
