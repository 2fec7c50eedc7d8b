#!/usr/bin/env python3
"""Write collector/data/shipped-verdicts.json from the built-in agent definitions and their schema (each
is checked first). Run it after changing a file in agents.d/ or schemas/agent-definition.schema.json;
tests/definitions/test_definition_verdicts.py fails until it is run."""

from collector.cli.ship_verdicts import main

if __name__ == "__main__":
    main()
