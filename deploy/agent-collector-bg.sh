#!/bin/sh
# agent-collector as a plain background process, for machines with neither a systemd user manager nor
# launchd (containers, CI). deploy/install.sh copies this next to the program:
#   <data dir>/venv/share/agent-collector/deploy/agent-collector-bg.sh start|stop|restart|status|ensure|logs
# `start` runs a small supervisor (this script, `supervise`) that runs `agent-collector run` and starts it
# again when it dies (any exit but a clean one after `stop`), waiting 1 s, 2 s, 4 s ... up to 60 s between
# tries; a daemon that ran for a minute resets the wait. Files under <data dir>: agent-collector.pid (the
# daemon), agent-collector.supervisor.pid, service.last-exit (status and time of the last daemon exit),
# log/agent-collector.log; environment from service.env (KEY=VALUE lines written by install.sh).
# `ensure` starts it only when it is not running (what the optional ~/.profile hook calls).
# Exit status of `status`: 0 running, 3 not (with the reason, the last log lines and the log's path).
set -u
umask 077  # the log and pid files are ours alone (the daemon sets its own files 0600 anyway)

here=$(cd "$(dirname "$0")" && pwd)
SELF="$here/$(basename "$0")"
VENV=$(cd "$here/../../.." && pwd)
DATA_DIR=$(dirname "$VENV")
EXEC="$VENV/bin/agent-collector"
PIDFILE="$DATA_DIR/agent-collector.pid"
SUPFILE="$DATA_DIR/agent-collector.supervisor.pid"
LASTEXIT="$DATA_DIR/service.last-exit"
LOGDIR="$DATA_DIR/log"
LOG="$LOGDIR/agent-collector.log"
ENVFILE="$DATA_DIR/service.env"
MAX_DELAY=60
STEADY_S=60

load_env() {
  [ -f "$ENVFILE" ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
      AGENT_COLLECTOR_*=* | PATH=* | OTEL_*=*) export "$line" ;;
    esac
  done <"$ENVFILE"
}

is_ours() {  # is pid $1 an agent-collector process (the daemon or this supervisor)?
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1
  if [ -r "/proc/$1/cmdline" ]; then
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "agent-collector" && return 0
    return 1
  fi
  ps -p "$1" -o command= 2>/dev/null | grep -q "agent-collector"
}

lock_pid() {  # the daemon writes its pid into <state dir>/collector.lock while it runs
  state=${AGENT_COLLECTOR_DATA_DIR:-$DATA_DIR}/state
  [ -f "$state/collector.lock" ] && cat "$state/collector.lock" 2>/dev/null
}

read_pid() { pid=''; [ -f "$1" ] && read -r pid <"$1" 2>/dev/null; echo "$pid"; }

running_pid() {  # the daemon's pid, if it runs
  pid=$(read_pid "$PIDFILE")
  if is_ours "$pid"; then echo "$pid"; return 0; fi
  pid=$(lock_pid)
  if is_ours "$pid"; then echo "$pid"; return 0; fi
  return 1
}

supervisor_pid() {
  pid=$(read_pid "$SUPFILE")
  if is_ours "$pid"; then echo "$pid"; return 0; fi
  return 1
}

nap() { sleep 0.2 2>/dev/null || sleep 1; }
now() { date +%s; }
note() { printf '%s agent-collector supervisor: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$LOG"; }

supervise() {  # runs in the background (setsid); restarts the daemon until told to stop
  echo "$$" >"$SUPFILE"
  stopping=0 child='' sleeper='' delay=1
  trap 'stopping=1; kill -TERM $child $sleeper 2>/dev/null' TERM INT HUP
  while [ "$stopping" = 0 ]; do
    other=$(lock_pid)
    if is_ours "$other" && [ "$other" != "$child" ]; then
      note "another daemon holds the lock (pid $other); not starting a second one"
      break
    fi
    started_at=$(now)
    "$EXEC" run >>"$LOG" 2>&1 </dev/null &
    child=$!
    echo "$child" >"$PIDFILE"
    rc=0
    wait "$child" || rc=$?
    while kill -0 "$child" 2>/dev/null; do  # a trap interrupted `wait`: the daemon is still stopping
      rc=0
      wait "$child" || rc=$?
    done
    ran=$(($(now) - started_at))
    printf '%s %s\n' "$rc" "$(now)" >"$LASTEXIT"
    [ "$stopping" = 0 ] || break
    if [ "$rc" = 0 ]; then
      note "daemon (pid $child) exited cleanly after ${ran}s; not restarting it"
      break
    fi
    [ "$ran" -lt "$STEADY_S" ] || delay=1
    note "daemon (pid $child) exited with status $rc after ${ran}s; restarting in ${delay}s"
    sleep "$delay" &
    sleeper=$!
    wait "$sleeper" 2>/dev/null || true
    sleeper=''
    delay=$((delay * 2))
    [ "$delay" -le "$MAX_DELAY" ] || delay=$MAX_DELAY
  done
  rm -f "$SUPFILE" "$PIDFILE"
}

start() {
  if pid=$(running_pid); then
    echo "agent-collector: already running (pid $pid)"
    return 0
  fi
  [ -x "$EXEC" ] || { echo "agent-collector: $EXEC is missing" >&2; return 1; }
  if ! problem=$("$EXEC" config check 2>&1 >/dev/null); then  # a bad config: say why, do not start
    echo "agent-collector: not started: ${problem#agent-collector: error: }" >&2
    return 2
  fi
  if sup=$(supervisor_pid); then  # waiting out a back-off: start afresh
    kill -TERM "$sup" 2>/dev/null
    while is_ours "$sup"; do nap; done
  fi
  mkdir -p "$LOGDIR"
  rm -f "$PIDFILE" "$LASTEXIT"
  if command -v setsid >/dev/null 2>&1; then
    nohup setsid sh "$SELF" supervise >>"$LOG" 2>&1 </dev/null &
  else
    nohup sh "$SELF" supervise >>"$LOG" 2>&1 </dev/null &
  fi
  i=0
  while [ $i -lt 50 ]; do  # up to ~10 s for the daemon to take its lock
    pid=$(lock_pid)
    if is_ours "$pid" && [ "$pid" = "$(read_pid "$PIDFILE")" ]; then
      echo "agent-collector: started (pid $pid), log $LOG"
      return 0
    fi
    if [ -f "$LASTEXIT" ] || { [ $i -gt 5 ] && ! supervisor_pid >/dev/null; }; then
      read -r rc at <"$LASTEXIT" 2>/dev/null || rc='?'
      echo "agent-collector: failed to start (exit status $rc); last log lines of $LOG:" >&2
      tail -n 20 "$LOG" >&2 2>/dev/null
      if supervisor_pid >/dev/null; then
        echo "agent-collector: the supervisor keeps trying with back-off; \`stop\` gives up" >&2
      fi
      return 1
    fi
    i=$((i + 1))
    nap
  done
  echo "agent-collector: started but the daemon has not taken its lock yet; see $LOG"
}

stop() {
  sup=$(supervisor_pid) || sup=''
  pid=$(running_pid) || pid=''
  if [ -z "$sup" ] && [ -z "$pid" ]; then
    rm -f "$PIDFILE" "$SUPFILE"
    echo "agent-collector: not running"
    return 0
  fi
  # the supervisor passes SIGTERM on to the daemon, which flushes and stops; a daemon without a
  # supervisor (started by an older version) gets it directly
  if [ -n "$sup" ]; then kill -TERM "$sup" 2>/dev/null; elif [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null; fi
  i=0
  while { is_ours "$sup" || is_ours "$pid"; } && [ $i -lt 100 ]; do  # up to ~20 s
    i=$((i + 1))
    nap
  done
  for left in $pid $sup; do
    if is_ours "$left"; then
      echo "agent-collector: pid $left did not stop on SIGTERM; killing it" >&2
      kill -KILL "$left" 2>/dev/null
    fi
  done
  rm -f "$PIDFILE" "$SUPFILE"
  echo "agent-collector: stopped${pid:+ (pid $pid)}"
}

status() {
  if pid=$(running_pid); then
    echo "agent-collector: running (pid $pid), log $LOG"
    return 0
  fi
  why="not running"
  if [ -f "$LASTEXIT" ]; then
    read -r rc at <"$LASTEXIT" 2>/dev/null
    why="$why; the daemon last exited with status ${rc:-?} $(($(now) - ${at:-0}))s ago"
  fi
  if supervisor_pid >/dev/null; then why="$why; the supervisor will start it again shortly"; fi
  echo "agent-collector: $why"
  echo "log: $LOG"
  if [ -s "$LOG" ]; then
    echo "last log lines:"
    tail -n 10 "$LOG" | sed 's/^/    /'
  fi
  return 3
}

logs() {
  [ -f "$LOG" ] || { echo "agent-collector: no log yet ($LOG)" >&2; return 1; }
  if [ "${1:-}" = -f ]; then exec tail -n 50 -f "$LOG"; fi
  tail -n 50 "$LOG"
}

load_env
case ${1:-} in
  start) start ;;
  stop) stop ;;
  restart) stop && start ;;
  ensure) running_pid >/dev/null || supervisor_pid >/dev/null || start ;;
  status) status; exit $? ;;
  logs) logs "${2:-}" ;;
  supervise) supervise ;;
  *) echo "usage: $0 start|stop|restart|status|ensure|logs [-f]" >&2; exit 2 ;;
esac
