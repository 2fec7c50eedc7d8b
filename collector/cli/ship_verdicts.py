"""Make the list of shipped verdicts (``collector.util.shipped_verdicts``): every built-in agent
definition, the definition schema, each definition's plug-in specs and the default exporter specs, each
checked against its schema first. Used by ``scripts/ship_verdicts.py`` and the test that keeps the list
true; never at run time."""

from __future__ import annotations

from typing import Any

import orjson

from collector.util.shipped_verdicts import FILE, SCHEMA_CHECK, plain_digest


def current() -> list[str]:
    """The digests of the built-in files as they are now, each checked first (a ValueError names an
    invalid one: it must not be shipped as valid)."""
    import jsonschema

    from collector.definitions.schema import definition_schema
    from collector.paths import project_root

    schema = definition_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    out = {plain_digest(SCHEMA_CHECK, schema)}
    for path in sorted((project_root() / "agents.d").glob("*.json")):
        document = orjson.loads(path.read_bytes())
        _valid(cls(schema), document, str(path))
        out.add(plain_digest(schema, document))
        out.update(_spec_digests(document, str(path)))
    return sorted(out | _exporter_digests())


def _valid(validator: Any, document: Any, what: str) -> None:
    errors = list(validator.iter_errors(document))
    if errors:
        raise ValueError(f"{what}: {errors[0].json_path}: {errors[0].message}")


def _exporter_digests() -> set[str]:
    """What ``configure`` checks for each exporter under the default configuration."""
    from collector.config import defaults
    from collector.exporters.registry import config_section, exporters
    from collector.registry import with_defaults

    registry, config = exporters(), defaults()
    out = set()
    for kind in registry.kinds_in_order():
        schema = registry.get(kind).schema
        out.add(plain_digest(schema, with_defaults(schema, config_section(config, kind))))
    return out


def _spec_digests(document: dict[str, Any], file: str) -> set[str]:
    """What ``collector.registry.Registry.configure`` checks for each plug-in spec of a definition."""
    import jsonschema

    from collector.daemon.plugins import registries
    from collector.registry import with_defaults

    regs = registries()
    specs: list[tuple[Any, str, dict[str, Any]]] = [(regs["parsers"], document["parser"], {})]  # no spec
    specs += [(regs["source kinds"], s["kind"], s) for s in document.get("sources", [])]
    for spec in document.get("integrations", []):
        specs.append((regs["integration kinds"], spec["kind"], spec))
        trust = spec.get("trust")
        if isinstance(trust, dict) and trust.get("store"):
            specs.append((regs["trust stores"], str(trust["store"]), trust))
    out = set()
    for registry, kind, spec in specs:
        schema = registry.get(kind).schema
        config = with_defaults(schema, spec)
        _valid(jsonschema.validators.validator_for(schema)(schema), config, f"{file}: {kind}")
        out.add(plain_digest(schema, config))
    return out


def main() -> None:
    digests = current()
    FILE.write_bytes(orjson.dumps({"valid": digests}, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {FILE} ({len(digests)} digests)")
