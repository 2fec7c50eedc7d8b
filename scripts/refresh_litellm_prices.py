#!/usr/bin/env python3
"""Refresh collector/data/litellm-prices.json, the second offline price table (after genai-prices).

    python3 scripts/refresh_litellm_prices.py [--version 1.110.2] [--from-file model_prices.json]

Downloads the ``litellm`` wheel from PyPI with ``pip download litellm==VERSION --no-deps`` (into a
temporary folder), reads ``litellm/model_prices_and_context_window_backup.json`` from it and writes a
trimmed copy: only chat models with a price, only the price fields (``litellm_provider``,
``input_cost_per_token``, ``output_cost_per_token``, ``cache_read_input_token_cost``,
``cache_creation_input_token_cost``, ``tiered_pricing``), with the source and the date in the file.
``--from-file`` trims a file already on disk (same name in the wheel) instead of downloading.
The collector itself never makes a network call for prices.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MEMBER = "litellm/model_prices_and_context_window_backup.json"
OUT = Path(__file__).resolve().parent.parent / "collector" / "data" / "litellm-prices.json"
RATES = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
         "cache_creation_input_token_cost")
DEFAULT_VERSION = "1.110.2"


def download(version: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"litellm=={version}", "--no-deps",
                        "--only-binary", ":all:", "-d", tmp, "-q"], check=True)
        (wheel,) = Path(tmp).glob("litellm-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            data: dict[str, Any] = json.loads(archive.read(MEMBER))
    return data


def _tier(tier: dict[str, Any]) -> dict[str, Any] | None:
    rng = tier.get("range")
    if not (isinstance(rng, list) and len(rng) == 2 and "input_cost_per_token" in tier):
        return None
    return {"range": [int(rng[0]), int(rng[1])], **{k: tier[k] for k in RATES if k in tier}}


def trim(full: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Chat models that have a price, with only their price fields."""
    models: dict[str, dict[str, Any]] = {}
    for key, entry in sorted(full.items()):
        if key == "sample_spec" or not isinstance(entry, dict) or entry.get("mode") != "chat":
            continue
        kept: dict[str, Any] = {"litellm_provider": entry.get("litellm_provider", "")}
        kept.update({k: entry[k] for k in RATES if isinstance(entry.get(k), int | float)})
        tiers = [t for t in (_tier(x) for x in entry.get("tiered_pricing") or [] if isinstance(x, dict)) if t]
        if tiers:
            kept["tiered_pricing"] = tiers
        if "input_cost_per_token" in kept or tiers:
            models[key] = kept
    return models


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=DEFAULT_VERSION, help="the litellm release on PyPI")
    parser.add_argument("--from-file", type=Path, help=f"{MEMBER} already on disk (from that release)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    full = json.loads(args.from_file.read_bytes()) if args.from_file else download(args.version)
    models = trim(full)
    doc = {"source": f"litellm {args.version} wheel from PyPI, file {MEMBER} (trimmed: chat models, price "
                     f"fields only; scripts/refresh_litellm_prices.py)",
           "version": f"litellm {args.version}", "date": datetime.now(UTC).date().isoformat(), "models": models}
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False)
    # one model per line: small, and a refresh shows as a readable diff
    body = ",\n".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in models.items())
    head = text[:text.index('"models":')]
    args.out.write_text(f"{head}\"models\":{{\n{body}\n}}}}\n")
    print(f"wrote {args.out}: {len(models)} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
