#!/bin/sh
# Run the whole test suite on a fresh machine: creates .venv, installs the project with its dev extras,
# then runs pytest (the end-to-end tests install the pinned agent CLIs from npm into .cache/ themselves).
# Extra arguments go to pytest, e.g. `sh scripts/test.sh -m "not e2e"` or `sh scripts/test.sh -k masking`.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | cksum | cut -d' ' -f1)
if [ ! -f "$stamp" ]; then
    echo "== installing agent-collector[dev] into .venv" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    if ! .venv/bin/python -m pip install --quiet -e '.[dev]' > .venv/pip-install.log 2>&1; then
        cat .venv/pip-install.log >&2
        echo "pip install failed (log above)" >&2
        exit 1
    fi
    rm -f .venv/.installed-* && touch "$stamp"
fi
echo "== pytest" >&2
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
