#!/bin/sh
# Uninstall agent-collector for the current user (POSIX sh): stop and remove the service, take our
# integrations out of every agent (only entries marked as ours; a config file nobody else touched comes
# back byte for byte, files we created are deleted), remove the program. Collected data (spool, output,
# state, queues) and the config are kept unless --purge; the spool (raw hook payloads) is always deleted.
set -eu

usage() {
  cat <<'EOF'
usage: deploy/uninstall.sh [--purge] [--dry-run]
  --purge     also delete collected data and the config
  --dry-run   print every change, change nothing
EOF
}

say() { printf '%s\n' "$*"; }
run() {
  if [ "$DRY" = 1 ]; then say "would run: $*"; else say "+ $*"; "$@"; fi
}

DRY=0 PURGE=0
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --purge) PURGE=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; printf 'uninstall.sh: error: unknown option: %s\n' "$1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "${HOME:-}" ] || { echo "uninstall.sh: HOME is not set" >&2; exit 2; }

. "$(cd "$(dirname "$0")" && pwd)/paths.sh"
status=0

# -- 1. stop and remove the service (first, so its watchdog cannot put hooks back) ------------------
unit="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user/agent-collector.service"
if [ -f "$unit" ]; then
  if systemctl --user show-environment >/dev/null 2>&1; then
    run systemctl --user disable --now agent-collector.service || status=1
  fi
  run rm -f "$unit"
  if systemctl --user show-environment >/dev/null 2>&1; then run systemctl --user daemon-reload || true; fi
fi
plist="$HOME/Library/LaunchAgents/$LABEL.plist"
if [ -f "$plist" ]; then
  run launchctl bootout "gui/$(id -u)/$LABEL" || true
  run rm -f "$plist"
fi
if [ -f "$SHARE/deploy/agent-collector-bg.sh" ]; then
  run sh "$SHARE/deploy/agent-collector-bg.sh" stop || status=1
elif [ -f "$DATA_DIR/agent-collector.pid" ]; then
  pid=$(cat "$DATA_DIR/agent-collector.pid")
  run kill -TERM "$pid" || true
fi

profile="$HOME/.profile"
if [ -f "$profile" ] && grep -q '>>> agent-collector autostart >>>' "$profile"; then
  if [ -f "$DATA_DIR/profile.written" ] && cmp -s "$profile" "$DATA_DIR/profile.written"; then
    if [ -f "$DATA_DIR/profile.orig" ]; then
      run cp -p "$DATA_DIR/profile.orig" "$profile"  # nobody touched it since: the original bytes
    else
      run rm -f "$profile"  # we created it
    fi
  else
    say "removing the autostart block from $profile"
    if [ "$DRY" = 0 ]; then
      # drop the block and the one blank line install.sh put before it; keep everything else
      awk '{ line[NR] = $0 }
           END {
             for (i = 1; i <= NR; i++) if (line[i] ~ />>> agent-collector autostart >>>/) s = i
             for (i = s; s && i <= NR; i++) if (line[i] ~ /<<< agent-collector autostart <<</) { e = i; break }
             if (s && e && s > 1 && line[s - 1] == "") s--
             for (i = 1; i <= NR; i++) if (!(s && e && i >= s && i <= e)) print line[i]
           }' "$profile" >"$profile.tmp.$$" && mv -f "$profile.tmp.$$" "$profile"
    fi
  fi
fi
[ "$DRY" = 1 ] || rm -f "$DATA_DIR/profile.orig" "$DATA_DIR/profile.written" "$DATA_DIR/profile.absent"

# -- 2. take our integrations out of the agents -----------------------------------------------------
if [ -x "$BIN" ]; then
  if [ "$DRY" = 1 ]; then
    "$BIN" uninstall --dry-run || status=1
  else
    "$BIN" uninstall || status=1
  fi
elif ls "$DATA_DIR/state/deploy/"*.json >/dev/null 2>&1; then
  say "warning: $BIN is missing: cannot remove our hooks from the agents (recorded in $DATA_DIR/state/deploy)" >&2
  status=1
else
  say "no integration of ours is recorded: nothing to take out of the agents"  # e.g. uninstalled before
fi

# -- 3. the link on PATH, the program, then (with --purge) the data -----------------------------------
if [ -L "$LINK" ] && [ "$(readlink "$LINK")" = "$BIN" ]; then run rm -f "$LINK"; fi
if [ -f "$DATA_DIR/user-bin.created" ]; then
  if [ "$DRY" = 1 ]; then say "would remove $USER_BIN if it is empty"; else rmdir "$USER_BIN" 2>/dev/null || true; fi
  [ "$DRY" = 1 ] || rm -f "$DATA_DIR/user-bin.created"
fi
if [ -d "$VENV" ]; then run rm -rf "$VENV"; fi
run rm -f "$DATA_DIR/service.env" "$DATA_DIR/service.mode" "$DATA_DIR/agent-collector.pid" \
  "$DATA_DIR/agent-collector.supervisor.pid" "$DATA_DIR/service.last-exit"
# the spool holds raw hook payloads (prompts, tool arguments) whatever the capture setting: it goes even
# without --purge, once the daemon is stopped (nothing reads it any more)
if [ -d "$DATA_DIR/spool" ] && [ ! -L "$DATA_DIR/spool" ]; then run rm -rf "$DATA_DIR/spool"; fi
if [ "$PURGE" = 1 ]; then
  run rm -rf "$DATA_DIR"
  run rm -rf "$CONFIG_DIR"
else
  say "kept collected data in $DATA_DIR and the config in $CONFIG_DIR (--purge removes them); deleted the spool"
fi
[ "$DRY" = 1 ] && say "dry run: nothing was changed"
exit "$status"
