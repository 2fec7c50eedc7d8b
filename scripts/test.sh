#!/bin/sh
# Run the whole test suite on a fresh machine: creates .venv, installs the project with its dev extras,
# then runs pytest (the end-to-end tests install the pinned agent CLIs from npm into .cache/ themselves).
# Extra arguments go to pytest, e.g. `sh scripts/test.sh -m "not e2e"` or `sh scripts/test.sh -k masking`.
#
# pytest runs with HOME (and the XDG directories) pointed at a fresh empty directory and npm's cache in
# .cache/npm: the tests must keep to their own temporary homes. Anything left in that HOME afterwards is
# listed and fails the run, whatever pytest said.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | cksum | cut -d' ' -f1)
if [ ! -f "$stamp" ] && [ -z "${AGENT_COLLECTOR_TEST_NO_INSTALL:-}" ]; then  # the variable: tests of this script
    echo "== installing agent-collector[dev] into .venv" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    if ! .venv/bin/python -m pip install --quiet -e '.[dev]' > .venv/pip-install.log 2>&1; then
        cat .venv/pip-install.log >&2
        echo "pip install failed (log above)" >&2
        exit 1
    fi
    rm -f .venv/.installed-* && touch "$stamp"
fi

mkdir -p .cache/npm
# The dashboard's browser test needs Debian's chromium; CI (root) installs it, elsewhere it skips.
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing chromium for the dashboard browser test" >&2
    if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
            > .cache/chromium-install.log 2>&1; then
        tail -5 .cache/chromium-install.log >&2
        echo "chromium could not be installed: the dashboard browser test will skip" >&2
    fi
fi

test_home=$(mktemp -d "${TMPDIR:-/tmp}/agent-collector-test-home.XXXXXX")
trap 'rm -rf "$test_home"' EXIT
trap 'exit 130' INT TERM
npm_config_cache=$(pwd)/.cache/npm
export npm_config_cache
unset XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME XDG_RUNTIME_DIR 2>/dev/null || true
unset CODEX_HOME CLAUDE_CONFIG_DIR GEMINI_CLI_HOME AGENT_COLLECTOR_HOME 2>/dev/null || true
# Toolchains found through HOME (rustup's proxies, used when pip builds a wheel from source, e.g. for a
# test's own venv) keep their real homes: a fresh HOME would make rustup write a new settings file there.
for tool_home in RUSTUP_HOME:.rustup CARGO_HOME:.cargo; do
    name=${tool_home%%:*}
    eval "value=\${$name:-}"
    if [ -z "$value" ] && [ -d "$HOME/${tool_home#*:}" ]; then
        export "$name=$HOME/${tool_home#*:}"
    fi
done

echo "== pytest (HOME=$test_home)" >&2
rc=0
HOME=$test_home .venv/bin/python -m pytest -q -p no:cacheprovider "$@" || rc=$?

leftover=$(cd "$test_home" && find . -mindepth 1 -maxdepth 3 | sort | head -50)
if [ -n "$leftover" ]; then
    echo "== FAIL: the tests wrote into HOME ($test_home); each test must use its own temporary home:" >&2
    echo "$leftover" >&2
    [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
