"""Render the service definitions from deploy/templates: a systemd user unit and a launchd plist.

Standard library only, and runnable as a script, so deploy/install.sh can use it (even for --dry-run,
before the virtual environment exists)::

    python3 units.py systemd --exec /path/bin/agent-collector --env KEY=VALUE ... > agent-collector.service
    python3 units.py launchd --exec ... --home ~ --log ~/…/agent-collector.log --env KEY=VALUE ...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

LABEL = "io.agent-collector.daemon"
UNIT_NAME = "agent-collector.service"
TEMPLATES = Path(__file__).resolve().parents[2] / "deploy" / "templates"


def systemd_quote(value: str, command: bool = True) -> str:
    """One ExecStart (``command``) or Environment= word: double-quoted, with systemd's escapes for \\ "
    and % (specifiers); ``$`` only in commands, where systemd expands variables."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if command:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'


def render_systemd(executable: str, env: Mapping[str, str], templates: Path = TEMPLATES) -> str:
    for key in env:
        if not key.replace("_", "").isalnum():
            raise ValueError(f"bad environment variable name {key!r}")
    text = (templates / f"{UNIT_NAME}.in").read_text("utf-8")
    environment = "\n".join(
        f"Environment={systemd_quote(f'{k}={v}', command=False)}" for k, v in sorted(env.items())
    )
    return text.replace("@EXEC@", systemd_quote(executable)).replace("@ENVIRONMENT@", environment)


def render_launchd(executable: str, home: str, log: str, env: Mapping[str, str], label: str = LABEL,
                   templates: Path = TEMPLATES) -> str:
    text = (templates / "agent-collector.plist.in").read_text("utf-8")
    environment = "\n".join(
        f"    <key>{escape(k)}</key>\n    <string>{escape(v)}</string>" for k, v in sorted(env.items())
    )
    for placeholder, value in (("@LABEL@", label), ("@EXEC@", executable), ("@HOME@", home), ("@LOG@", log)):
        text = text.replace(placeholder, escape(value))
    return text.replace("@ENVIRONMENT@", environment)


def _env_pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--env needs KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the agent-collector service definition.")
    parser.add_argument("kind", choices=["systemd", "launchd"])
    parser.add_argument("--exec", dest="executable", required=True, help="the agent-collector program")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--home", default=str(Path.home()))
    parser.add_argument("--log", default="")
    parser.add_argument("--label", default=LABEL)
    parser.add_argument("--templates", type=Path, default=TEMPLATES)
    args = parser.parse_args(argv)
    env = _env_pairs(args.env)
    if args.kind == "systemd":
        sys.stdout.write(render_systemd(args.executable, env, args.templates))
    else:
        text = render_launchd(args.executable, args.home, args.log, env, args.label, args.templates)
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
