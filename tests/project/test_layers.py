"""The layer rule of docs/architecture.md, checked on the source: a package (or root module) of
`collector/` imports only those of lower layers, never one of its own layer or a higher one. Every import
counts: at the top, inside a function, under TYPE_CHECKING, and of a package's face (`__init__`).
Within a package, no module imports the package's own face (while the face imports that module, what it
defines is not there yet: `collector.deploy` had three such loops)."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "collector"

# lowest first; a unit may import the units of the layers before its own
LAYERS: list[tuple[str, ...]] = [
    ("__init__",),  # the version and the schema version
    ("util",),
    ("model", "paths", "registry"),
    ("definitions", "state"),
    ("config",),
    ("sources",),
    ("agents",),
    ("pipeline",),
    ("usage",),
    ("exporters",),
    ("external", "ingest"),
    ("deploy",),
    ("daemon",),
    ("dashboard", "doctor"),
    ("cli",),
    ("__main__",),
]
LAYER = {unit: n for n, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """``collector.sources.decode`` -> ``sources``; ``collector.paths`` -> ``paths``; ``collector`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(path: Path) -> bool:
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of each import of a collector module; ``from collector import x`` names ``collector.x``."""
    package = _module_of(path) if path.name == "__init__.py" else _module_of(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "collector")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per dot after the first
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base == "collector":  # a root module, or a name the root's face defines
                yield from ((node.lineno, f"collector.{a.name}" if _is_module(ROOT / a.name) else "collector")
                            for a in node.names)
            elif base.startswith("collector."):
                yield node.lineno, base


def test_every_unit_has_a_layer() -> None:
    units = {p.stem if p.suffix == ".py" else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert units - set(LAYER) == set(), "a new package or root module: give it a layer here and in the doc"
    assert set(LAYER) - units == set(), "a layer names what is not there"


def _upward_imports() -> list[str]:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        source = _unit(_module_of(path)) if path.parent != ROOT else path.stem
        for line, module in _imports(path):
            target = _unit(module)
            if target != source and LAYER[target] >= LAYER[source]:
                wrong.append(f"{path.relative_to(ROOT.parent)}:{line} ({source}) imports {module} ({target})")
    return wrong


def _face_imports() -> list[str]:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__init__.py" or path.parent == ROOT:
            continue
        face = _module_of(path).rpartition(".")[0]
        wrong += [f"{path.relative_to(ROOT.parent)}:{line} imports {module}"
                  for line, module in _imports(path) if module == face]
    return wrong


def test_no_unit_imports_its_own_layer_or_a_higher_one() -> None:
    assert _upward_imports() == []


def test_no_module_imports_its_own_package_face() -> None:
    """``from collector.deploy import engine`` in a module of collector.deploy goes through the face, which
    may be importing that very module: a sibling is imported by its own name (``import
    collector.deploy.engine as engine``, ``from collector.deploy.engine import ...``)."""
    assert _face_imports() == []


def test_the_architecture_table_is_this_layer_list() -> None:
    """docs/architecture.md's tree (``| layer | package | owns |``) names every unit at the layer it has here."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    table: dict[str, int] = {}
    for row in re.findall(r"^\| (\d+) \| (.+?) \|", doc, re.M):
        for name in re.findall(r"`([^`]+)`", row[1]):
            table[name.removeprefix("collector/").removesuffix("/").removesuffix(".py")] = int(row[0])
    assert len(table) > 10, "the table is where the test looks"
    assert table == LAYER


def test_the_rule_sees_a_face_a_function_and_type_checking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above on a planted tree: a lower layer's face, a function body and a TYPE_CHECKING block
    that import upwards, and a module that imports its own package's face, are each named."""
    tree = tmp_path / "collector"
    for folder in ("util", "cli", "deploy"):
        (tree / folder).mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "util" / "__init__.py").write_text("import collector.cli.main\n")
    (tree / "util" / "late.py").write_text("def f():\n    from collector.deploy import engine\n")
    (tree / "util" / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from ..cli.main import run\n")
    (tree / "cli" / "__init__.py").write_text("")
    (tree / "cli" / "main.py").write_text("from collector.util import late\n")
    (tree / "deploy" / "__init__.py").write_text("from collector.deploy.engine import install\n")
    (tree / "deploy" / "engine.py").write_text("from collector.deploy import model\ndef install(): ...\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tree)
    assert _upward_imports() == ["collector/util/__init__.py:1 (util) imports collector.cli.main (cli)",
                                 "collector/util/late.py:2 (util) imports collector.deploy (deploy)",
                                 "collector/util/typed.py:3 (util) imports collector.cli.main (cli)"]
    assert _face_imports() == ["collector/deploy/engine.py:1 imports collector.deploy"]
