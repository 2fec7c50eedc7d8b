"""Every module of `collector/` imports on its own, as the first collector module of a process: no import
loop through a package face (issue 24: importing `collector.deploy.strategies`, since split, alone ran the face
`collector/deploy/__init__.py`, which imported the half-built module back). One child process imports
each module in turn, with every `collector` module forgotten before the next, so each one starts from
nothing of ours; the static side of the same rule is in test_layers.py and test_import_graph.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import ROOT

# forget every module of the package, import one, say what failed; a module per line on stdin
_CHILD = """
import importlib, sys, traceback
for name in sys.stdin.read().split():
    for loaded in [m for m in sys.modules if m == sys.argv[1] or m.startswith(sys.argv[1] + ".")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(f"{name}: {type(exc).__name__}: {exc}")
"""


def _modules(package: Path) -> list[str]:
    names = []
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _failures(root: Path, package: str, modules: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _CHILD, package], input="\n".join(modules), cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_every_collector_module_imports_alone() -> None:
    modules = [m for m in _modules(ROOT / "collector") if m != "collector.__main__"]  # __main__ runs the CLI
    assert len(modules) > 150 and "collector.deploy.engine" in modules
    assert _failures(ROOT, "collector", modules) == []


def test_a_loop_through_a_package_face_is_found(tmp_path: Path) -> None:
    """The shape of the old collector.deploy loop: the face imports a module that imports the face's own
    name back while the face is half built."""
    package = tmp_path / "looped"
    package.mkdir()
    (package / "__init__.py").write_text("from looped.engine import install\nVERSION = 1\n")
    (package / "engine.py").write_text("from looped.strategies import edit\n\ndef install():\n    return edit()\n")
    (package / "strategies.py").write_text("from looped import VERSION\n\ndef edit():\n    return VERSION\n")
    failures = _failures(tmp_path, "looped", _modules(package))
    assert [f.split(":")[0] for f in failures] == ["looped", "looped.engine", "looped.strategies"]
    assert all("partially initialized" in f for f in failures), failures
