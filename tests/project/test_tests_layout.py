"""`tests/` mirrors `collector/` (issue 24): the tests of a package are in `tests/<package>/`, those of a root
module (`config.py`, `registry.py`) in `tests/<module>/`; besides them only `project/` (the project as a
whole), `e2e/` (the real agent CLIs), `support/` (the shared helpers, one package) and `fixtures/`. No test
module stands loose in `tests/`, and no helper module that is not a test sits beside the tests of a package."""

from __future__ import annotations

from support import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "collector"
OWN = {"project", "e2e", "support", "fixtures"}


def _units() -> set[str]:
    return {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" and not p.name.startswith("__")) or (p / "__init__.py").exists()}


def _folders() -> set[str]:
    return {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}


def test_every_tests_folder_is_a_unit_of_collector_or_the_projects_own() -> None:
    assert {"agents", "pipeline", "daemon"} <= _units()
    assert _folders() - OWN - _units() == set()


def test_every_package_of_collector_has_its_tests_folder() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages - _folders() == set()


def test_no_test_module_stands_loose_in_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("*.py")) == ["conftest.py"]


def test_beside_the_tests_of_a_package_only_tests() -> None:
    """A helper several tests use belongs in tests/support/, where every test can find it."""
    loose = [str(p.relative_to(TESTS)) for folder in _folders() - OWN for p in (TESTS / folder).glob("*.py")
             if not p.name.startswith("test_") and p.name not in ("__init__.py", "conftest.py")]
    assert loose == []



def test_no_two_test_modules_share_a_name() -> None:
    """The tests' folders are not packages: pytest imports each test module by its bare name, so a second
    tests/<x>/test_a.py beside tests/<y>/test_a.py stops the whole run at collection."""
    seen: dict[str, str] = {}
    twice = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if "fixtures" in path.relative_to(TESTS).parts:
            continue
        rel = str(path.relative_to(TESTS))
        if path.name in seen:
            twice.append(f"{seen[path.name]} and {rel}")
        seen.setdefault(path.name, rel)
    assert twice == []
