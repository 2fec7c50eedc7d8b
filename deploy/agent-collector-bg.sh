#!/bin/sh
# agent-collector as a plain background process, for machines with neither a systemd user manager nor
# launchd (containers, CI). deploy/install.sh copies this next to the program:
#   <data dir>/venv/share/agent-collector/deploy/agent-collector-bg.sh start|stop|restart|status|ensure
# Pid file <data dir>/agent-collector.pid, log <data dir>/log/agent-collector.log, environment from
# <data dir>/service.env (KEY=VALUE lines written by install.sh). `ensure` starts it only when it is
# not running (what the optional ~/.profile hook calls). Exit status of `status`: 0 running, 3 not.
set -u
umask 077  # the log and pid files are ours alone (the daemon sets its own files 0600 anyway)

here=$(cd "$(dirname "$0")" && pwd)
VENV=$(cd "$here/../../.." && pwd)
DATA_DIR=$(dirname "$VENV")
EXEC="$VENV/bin/agent-collector"
PIDFILE="$DATA_DIR/agent-collector.pid"
LOGDIR="$DATA_DIR/log"
LOG="$LOGDIR/agent-collector.log"
ENVFILE="$DATA_DIR/service.env"

load_env() {
  [ -f "$ENVFILE" ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
      AGENT_COLLECTOR_*=* | PATH=* | OTEL_*=*) export "$line" ;;
    esac
  done <"$ENVFILE"
}

is_ours() {  # is pid $1 an agent-collector process?
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

running_pid() {
  pid=''
  [ -f "$PIDFILE" ] && read -r pid <"$PIDFILE" 2>/dev/null
  if is_ours "$pid"; then echo "$pid"; return 0; fi
  pid=$(lock_pid)
  if is_ours "$pid"; then echo "$pid"; return 0; fi
  return 1
}

nap() { sleep 0.2 2>/dev/null || sleep 1; }

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
  mkdir -p "$LOGDIR"
  if command -v setsid >/dev/null 2>&1; then
    nohup setsid "$EXEC" run >>"$LOG" 2>&1 </dev/null &
  else
    nohup "$EXEC" run >>"$LOG" 2>&1 </dev/null &
  fi
  started=$!
  echo "$started" >"$PIDFILE"
  i=0
  while [ $i -lt 50 ]; do  # up to ~10 s for the daemon to take its lock
    pid=$(lock_pid)
    if is_ours "$pid"; then
      echo "$pid" >"$PIDFILE"  # the daemon's own pid, even if setsid forked
      echo "agent-collector: started (pid $pid), log $LOG"
      return 0
    fi
    if ! kill -0 "$started" 2>/dev/null; then
      rm -f "$PIDFILE"
      echo "agent-collector: failed to start; last log lines:" >&2
      tail -n 20 "$LOG" >&2 2>/dev/null
      return 1
    fi
    i=$((i + 1))
    nap
  done
  echo "agent-collector: started (pid $started) but it has not taken its lock yet; see $LOG"
}

stop() {
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    echo "agent-collector: not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null
  i=0
  while is_ours "$pid" && [ $i -lt 100 ]; do  # it flushes and stops on SIGTERM; up to ~20 s
    i=$((i + 1))
    nap
  done
  if is_ours "$pid"; then
    echo "agent-collector: pid $pid did not stop on SIGTERM; killing it" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$PIDFILE"
  echo "agent-collector: stopped (pid $pid)"
}

load_env
case ${1:-} in
  start) start ;;
  stop) stop ;;
  restart) stop && start ;;
  ensure) running_pid >/dev/null || start ;;
  status)
    if pid=$(running_pid); then echo "agent-collector: running (pid $pid)"; exit 0; fi
    echo "agent-collector: not running"
    exit 3
    ;;
  *) echo "usage: $0 start|stop|restart|status|ensure" >&2; exit 2 ;;
esac
