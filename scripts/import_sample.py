#!/usr/bin/env python3
"""Turn a real capture (shared/samples/<agent>/<scenario>/) into a test fixture.

    python3 scripts/import_sample.py SAMPLE_DIR tests/fixtures/<agent>/<case> --agent ID [--home-glob GLOB ...]

Copies the agent's own files matched by the globs (relative to the capture's home/), converts
hooks.jsonl (one line per hook call, as the capture tool wrote it) into our spool envelope
``{ts, agent, event, payload}``, and keeps the model server's ``response_usage`` lines as the token
ground truth (``response_usage.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def convert_hooks(src: Path, dst: Path, agent: str) -> int:
    lines = []
    for raw in src.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        hook = json.loads(raw)
        payload = hook.get("stdin_json")
        if payload is None and hook.get("argv"):
            try:
                payload = json.loads(hook["argv"][-1])
            except (ValueError, TypeError):
                payload = None
        lines.append(json.dumps({"ts": hook["ts"], "agent": agent, "event": hook["label"], "payload": payload}))
    day = time.strftime("%Y-%m-%d", time.gmtime(json.loads(src.read_text().splitlines()[0])["ts"])) if lines else "x"
    out = dst / "spool" / agent / f"{agent}-{day}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    return len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sample", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--home-glob", action="append", default=[], help="files under home/ to copy")
    args = ap.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for pattern in args.home_glob:
        for path in sorted((args.sample / "home").glob(pattern)):
            if path.is_file():
                target = args.dest / "home" / path.relative_to(args.sample / "home")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    hooks = args.sample / "hooks.jsonl"
    n = convert_hooks(hooks, args.dest, args.agent) if hooks.exists() and hooks.stat().st_size else 0
    usage = [line for line in (args.sample / "fake_llm_requests.jsonl").read_text().splitlines()
             if '"kind": "response_usage"' in line]
    (args.dest / "response_usage.jsonl").write_text("\n".join(usage) + "\n", encoding="utf-8")
    print(f"{args.dest}: {n} hook lines, {len(usage)} model responses")


if __name__ == "__main__":
    main()
