#!/bin/sh
# Install agent-collector for the current user (POSIX sh). Run it from a checkout: deploy/install.sh
#
# 1. puts the package into its own virtual environment, <data dir>/venv (pip, from this checkout or
#    --wheel), and copies agents.d schemas hooks integrations next to it (<venv>/share/agent-collector);
# 2. detects the installed agents and deploys our integration into each (or only --agents a,b);
# 3. writes a default config if there is none;
# 4. installs and starts the service: a systemd user unit (Linux with a user manager), a launchd
#    LaunchAgent (macOS), or else a background process with a pid file and a log file (containers, CI),
#    whose supervisor restarts a daemon that dies, started again at login by ~/.profile only with
#    --autostart-profile. `agent-collector service start|stop|restart|status|logs` controls any of them;
# 5. links agent-collector into ~/.local/bin (and says what to add to PATH when that is not on it).
# Running it again upgrades in place: checkpoints, queues, spool, output and config are kept.
# --dry-run prints every change and makes none. deploy/uninstall.sh undoes all of it.
set -eu
umask 077  # our data and config directories are owner-only from the start (files that others read say 644)

usage() {
  cat <<'EOF'
usage: deploy/install.sh [options]
  --agents a,b           deploy into these agents only (default: every detected agent)
  --dry-run              print every change, change nothing
  --service MODE         auto (default) | systemd | launchd | background | none
  --autostart-profile    background mode: also start it from ~/.profile at login (so it comes back
                         after a reboot at the first login; without it only `service start` does)
  --python PY            Python >= 3.11 for the virtual environment (default: python3)
  --wheel FILE           install this built wheel instead of the checkout
  --deps-from DIR        offline: take the dependencies from this virtual environment or site-packages
                         (only agent-collector itself is installed into ours)
  -h, --help             this help
EOF
}

say() { printf '%s\n' "$*"; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 2; }
quoted() {  # print a command the way a shell would read it back
  out=''
  for arg in "$@"; do
    case $arg in
      *[!A-Za-z0-9_./:=@%+-]* | '') arg="'$(printf '%s' "$arg" | sed "s/'/'\\\\''/g")'" ;;
    esac
    out="$out $arg"
  done
  printf '%s' "${out# }"
}
run() {  # run a command, or in --dry-run only show it
  if [ "$DRY" = 1 ]; then say "would run: $(quoted "$@")"; else say "+ $(quoted "$@")"; "$@"; fi
}
write_file() {  # write_file PATH MODE < content (atomic; shown, not written, in --dry-run)
  if [ "$DRY" = 1 ]; then
    say "would write $1:"
    sed 's/^/    | /'
    return 0
  fi
  mkdir -p "$(dirname "$1")"
  cat >"$1.tmp.$$"
  chmod "$2" "$1.tmp.$$"
  mv -f "$1.tmp.$$" "$1"
  say "wrote $1"
}
copy_dir() {  # replace DEST with a copy of SRC (never half-copied)
  if [ "$DRY" = 1 ]; then say "would copy $1 -> $2"; return 0; fi
  rm -rf "$2.new"
  cp -R "$1" "$2.new"
  rm -rf "$2"
  mv "$2.new" "$2"
  say "copied $1 -> $2"
}

DRY=0 AGENTS='' SERVICE=auto AUTOSTART=0 WHEEL='' PY=python3 DEPS_FROM=''
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --agents) [ $# -ge 2 ] || die "--agents needs a list"; AGENTS=$2; shift ;;
    --agents=*) AGENTS=${1#*=} ;;
    --service) [ $# -ge 2 ] || die "--service needs a mode"; SERVICE=$2; shift ;;
    --service=*) SERVICE=${1#*=} ;;
    --autostart-profile) AUTOSTART=1 ;;
    --python) [ $# -ge 2 ] || die "--python needs a path"; PY=$2; shift ;;
    --python=*) PY=${1#*=} ;;
    --wheel) [ $# -ge 2 ] || die "--wheel needs a file"; WHEEL=$2; shift ;;
    --wheel=*) WHEEL=${1#*=} ;;
    --deps-from) [ $# -ge 2 ] || die "--deps-from needs a directory"; DEPS_FROM=$2; shift ;;
    --deps-from=*) DEPS_FROM=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done
case $SERVICE in auto | systemd | launchd | background | none) ;; *) die "unknown --service $SERVICE" ;; esac

SRC=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$SRC/pyproject.toml" ] && [ -d "$SRC/agents.d" ] && [ -d "$SRC/collector" ] ||
  die "$SRC is not an agent-collector checkout (run deploy/install.sh from one)"
[ -z "$WHEEL" ] || [ -f "$WHEEL" ] || die "no such wheel: $WHEEL"
[ -z "$WHEEL" ] || WHEEL="$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")"
[ -z "$DEPS_FROM" ] || [ -d "$DEPS_FROM" ] || die "no such directory: $DEPS_FROM"
[ -z "$DEPS_FROM" ] || DEPS_FROM=$(cd "$DEPS_FROM" && pwd)
[ -n "${HOME:-}" ] || die "HOME is not set"

. "$SRC/deploy/paths.sh"

command -v "$PY" >/dev/null 2>&1 || die "$PY not found (use --python)"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PY is older than Python 3.11"

[ "$DRY" = 1 ] && say "agent-collector install (dry run: nothing will be changed)"
say "program: $VENV"
say "data:    $DATA_DIR"
say "config:  $CONFIG_DIR"

# -- 1. the program --------------------------------------------------------------------------------
if [ -x "$VENV/bin/python" ]; then
  say "upgrading the existing installation in place (data and config are kept)"
else
  run "$PY" -m venv "$VENV"
fi
pip_args="--disable-pip-version-check --no-input"  # not --quiet: its "Collecting ..." lines are the progress
if [ -n "$DEPS_FROM" ]; then
  deps_site=$(find "$DEPS_FROM" -maxdepth 4 -type d -name site-packages 2>/dev/null | head -n 1)
  [ -n "$deps_site" ] || deps_site=$DEPS_FROM
  [ -d "$deps_site" ] || die "--deps-from: no site-packages under $DEPS_FROM"
  if [ "$DRY" = 1 ]; then
    say "would link dependencies from $deps_site (agent-collector-deps.pth)"
  else
    purelib=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\n' "$deps_site" | write_file "$purelib/agent-collector-deps.pth" 644
  fi
  pip_args="$pip_args --no-deps"
fi
# pip_args is a list of plain words: split on purpose. A checkout is always rebuilt and reinstalled;
# a wheel of the same version needs --force-reinstall (then a second pass for missing dependencies).
# The program is reinstalled only when what it is built from changed (the wheel, or the checkout's
# pyproject.toml and package files): a second install with nothing changed reuses the environment.
if [ -n "$WHEEL" ]; then
  source_id=$(cksum <"$WHEEL")
else
  source_id=$(find "$SRC/pyproject.toml" "$SRC/collector" -type f ! -name '*.pyc' | LC_ALL=C sort | xargs cat | cksum)
fi
source_id="$source_id deps:${DEPS_FROM:-pip}"
stamp="$VENV/.agent-collector-source"
if [ "$DRY" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$source_id" ] \
    && "$VENV/bin/python" -c 'import collector' >/dev/null 2>&1; then
  say "program unchanged since the last install: reusing $VENV"
else
  say "installing the program and its dependencies with pip (a minute or two the first time) ..."
  started=$(date +%s)
  rm -f "$stamp"
  if [ -n "$WHEEL" ]; then
    run "$VENV/bin/python" -m pip install $pip_args --force-reinstall --no-deps "$WHEEL"
    [ -n "$DEPS_FROM" ] || run "$VENV/bin/python" -m pip install $pip_args "$WHEEL"
  else
    run "$VENV/bin/python" -m pip install $pip_args "$SRC"
  fi
  [ "$DRY" = 1 ] || { printf '%s\n' "$source_id" >"$stamp"; say "program installed in $(( $(date +%s) - started )) s"; }
fi
run mkdir -p "$SHARE/deploy"
for part in agents.d schemas hooks integrations; do
  copy_dir "$SRC/$part" "$SHARE/$part"
done
copy_dir "$SRC/deploy/templates" "$SHARE/deploy/templates"
run cp "$SRC/deploy/agent-collector-bg.sh" "$SHARE/deploy/agent-collector-bg.sh"

# -- 2. default config -----------------------------------------------------------------------------
if [ -f "$CONFIG_DIR/config.toml" ]; then
  say "keeping $CONFIG_DIR/config.toml"
else
  write_file "$CONFIG_DIR/config.toml" 600 <<'EOF'
# agent-collector configuration, written by deploy/install.sh. Every setting has a default; uncomment to
# change one. Environment variables override this file: AGENT_COLLECTOR_<SECTION>__<KEY>=value.

# [content]
# capture = false        # keep prompts, completions, tool arguments and results (secrets masked)

# [jsonl]
# dir = ""               # default: <data dir>/output

# [otlp]
# enabled = false        # or set OTEL_EXPORTER_OTLP_ENDPOINT

# [ingest]
# port = 0               # loopback only; 0: a port chosen for this user (kept in <state dir>/ingest.port)

# [watchdog]
# enabled = true         # put our hooks back when another program removes them
# cooldown_s = 5
# daily_cap = 10
EOF
fi

# -- 3. the agents ---------------------------------------------------------------------------------
set --
for agent in $(printf '%s' "$AGENTS" | tr ',' ' '); do
  set -- "$@" --agent "$agent"
done
deploy_rc=0
if [ "$DRY" = 1 ]; then
  if [ -x "$BIN" ]; then
    say "agents (dry run of agent-collector install):"
    "$BIN" install --dry-run "$@" || deploy_rc=$?
  elif PYTHONPATH="$SRC" "$PY" -c 'import orjson, jsonschema, platformdirs' 2>/dev/null; then
    say "agents (dry run of agent-collector install, from the checkout; hooks will run $SHARE/hooks):"
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$SRC" "$PY" -m collector install --dry-run "$@" || deploy_rc=$?
  else
    say "would run: $(quoted "$BIN" install "$@") (exact changes unknown until the program is installed)"
  fi
else
  say "agents:"
  "$BIN" install "$@" || deploy_rc=$?
fi

# -- 4. the service --------------------------------------------------------------------------------
if [ "$DRY" = 0 ] && [ -x "$BIN" ] && ! problem=$("$BIN" config check 2>&1 >/dev/null); then
  say "service not started: ${problem#agent-collector: error: }" >&2  # it would exit at once (status 2)
  exit 2
fi
if [ "$SERVICE" = auto ]; then
  if [ "$OS" = Darwin ] && command -v launchctl >/dev/null 2>&1; then
    SERVICE=launchd
  elif command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then
    SERVICE=systemd
  else
    SERVICE=background
  fi
fi
say "service: $SERVICE"
{
  printf 'AGENT_COLLECTOR_DATA_DIR=%s\n' "$DATA_DIR"
  printf 'AGENT_COLLECTOR_CONFIG_DIR=%s\n' "$CONFIG_DIR"
  printf 'PATH=%s\n' "$PATH"
} | write_file "$DATA_DIR/service.env" 600
printf '%s\n' "$SERVICE" | write_file "$DATA_DIR/service.mode" 600

units() {  # render a service definition (stdlib-only script; works before the venv exists)
  "$PY" "$SRC/collector/deploy/units.py" "$@" --templates "$SRC/deploy/templates" --exec "$BIN" \
    --env "AGENT_COLLECTOR_DATA_DIR=$DATA_DIR" --env "AGENT_COLLECTOR_CONFIG_DIR=$CONFIG_DIR" --env "PATH=$PATH"
}

case $SERVICE in
  systemd)
    unit="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user/agent-collector.service"
    units systemd | write_file "$unit" 644
    run systemctl --user daemon-reload
    run systemctl --user enable agent-collector.service
    run systemctl --user restart agent-collector.service
    ;;
  launchd)
    plist="$HOME/Library/LaunchAgents/$LABEL.plist"
    mkdir_log="$DATA_DIR/log"
    run mkdir -p "$mkdir_log"
    units launchd --home "$HOME" --log "$mkdir_log/agent-collector.log" --label "$LABEL" | write_file "$plist" 644
    if [ "$DRY" = 0 ]; then launchctl bootout "gui/$(id -u)/$LABEL" >/dev/null 2>&1 || true; fi
    run launchctl bootstrap "gui/$(id -u)" "$plist"
    ;;
  background)
    run sh "$SHARE/deploy/agent-collector-bg.sh" restart
    if [ "$AUTOSTART" = 1 ]; then
      profile="$HOME/.profile"
      if [ -f "$profile" ] && grep -q '>>> agent-collector autostart >>>' "$profile"; then
        say "keeping the autostart block in $profile"
      else
        if [ "$DRY" = 0 ]; then
          if [ -f "$profile" ]; then cp -p "$profile" "$DATA_DIR/profile.orig"; else : >"$DATA_DIR/profile.absent"; fi
        fi
        {
          [ -f "$profile" ] && cat "$profile" && [ -n "$(tail -c 1 "$profile")" ] && printf '\n'
          [ -f "$profile" ] && printf '\n'
          printf '# >>> agent-collector autostart >>> (deploy/uninstall.sh removes this block)\n'
          printf "[ -f '%s' ] && sh '%s' ensure >/dev/null 2>&1\n" "$SHARE/deploy/agent-collector-bg.sh" \
            "$SHARE/deploy/agent-collector-bg.sh"
          printf '# <<< agent-collector autostart <<<\n'
        } | write_file "$profile" 644
        if [ "$DRY" = 0 ]; then cp -p "$profile" "$DATA_DIR/profile.written"; fi
      fi
    fi
    ;;
  none) say "not installing a service; start it with: $BIN run" ;;
esac

# -- 5. agent-collector on PATH: a link in ~/.local/bin ------------------------------------------------
linked=1
if [ -L "$LINK" ] && [ "$(readlink "$LINK")" = "$BIN" ]; then
  say "keeping the link $LINK -> $BIN"
elif [ -e "$LINK" ] || [ -L "$LINK" ]; then
  say "warning: $LINK exists and is not ours; left alone" >&2
  linked=0
else
  if [ ! -d "$USER_BIN" ]; then
    run mkdir -p "$USER_BIN"
    [ "$DRY" = 1 ] || : >"$DATA_DIR/user-bin.created"  # uninstall.sh removes the folder again if empty
  fi
  run ln -s "$BIN" "$LINK"
fi
case ":$PATH:" in *":$USER_BIN:"* | *":$USER_BIN/:"*) on_path=1 ;; *) on_path=0 ;; esac

say ""
if [ "$DRY" = 1 ]; then
  say "dry run: nothing was changed"
else
  if [ "$linked" = 0 ]; then
    say "the program is $BIN (call it by that path: $LINK is someone else's)"
  elif [ "$on_path" = 1 ]; then
    say "agent-collector is on your PATH ($LINK -> $BIN)"
  else
    say "agent-collector is linked as $LINK, but $USER_BIN is not on your PATH. Add this line to"
    say "~/.profile (or your shell's rc file) and open a new shell:"
    say '    export PATH="$HOME/.local/bin:$PATH"'
  fi
  say "done. Check it with: agent-collector status (start, stop, restart, logs: agent-collector service ...)"
fi
[ "$deploy_rc" = 0 ] || { say "some agents could not be set up (see the errors above)" >&2; exit 1; }
exit 0
