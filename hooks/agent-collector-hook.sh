#!/bin/sh
# agent-collector hook: append one line per hook call to the spool, and nothing else.
#
#   bash agent-collector-hook.sh <agent-id> <EventName> <spool-dir>           (payload on stdin)
#   bash agent-collector-hook.sh <agent-id> <EventName> <spool-dir> '<json>'  (payload as last argv:
#                                                                              Codex `notify`)
# (`install` writes it with bash where there is one; started by another sh it re-executes itself with
# bash, which costs one more process start.)
#
# Line written to <spool-dir>/<agent>/<agent>-YYYY-MM-DD.jsonl (UTC day):
#   {"ts":<epoch s.fraction>,"agent":"<id>","event":"<EventName>"[,"attributes":"<text>"][,"traceparent":"<text>"],"payload":<payload text>}
# - "attributes" is $AGENT_COLLECTOR_ATTRIBUTES ("key=value,key=value": per-invocation attributes the
#   daemon stamps on every entry of the session; when it is unset or empty, LoongSuite Pilot's
#   $LOONGSUITE_PILOT_SPAN_ATTRIBUTES, the same form, so a launcher written for Pilot keeps working) and
#   "traceparent" is $TRACEPARENT (W3C trace context of the program that started the agent), both
#   from the agent's environment and only when set: copied as
#   they are when they fit (attributes <= 1024 bytes with no control character, quote or backslash;
#   traceparent <= 128 bytes of lowercase hex digits and dashes), else written as false, which the
#   daemon reads into the spool envelope (collector/sources/spool_lines.py) and stamps on the session's
#   entries (collector/pipeline/invocation.py);
# - the payload text is the input as it came, with newlines and CRs turned into spaces (valid JSON has
#   them only between tokens); it is NOT checked here: the daemon parses every spool line anyway and
#   keeps a payload that is not valid JSON as a string ("payload_raw"), counted, without touching the
#   lines around it; an empty or all-blank input is written as null;
# - when it gives up it appends {"ts":..,"agent":..,"event":..,"dropped":"<reason>"} instead, which the
#   daemon counts (status: hook_dropped): "timeout" (the input did not end within the time cap,
#   $AGENT_COLLECTOR_HOOK_TIMEOUT seconds, default 2), "signal" (the agent killed it: TERM/INT/HUP) or
#   "error" (tr or timeout(1) failed).
# Cost: under bash 5 no program is started for a payload below 4096 bytes: the clock is $EPOCHREALTIME
# (the receive time stays with the event), the UTC day printf's %(...)T, stdin is one `read -N`, the
# line one builtin printf. The time cap is a forked bash (no program) that sends ALRM at the cap and ends
# as soon as this process does. A bigger payload never enters bash: `timeout tr` streams the rest of
# stdin into `dd`, which writes the line once, at the end of its input. Every line is ONE write(2) on an
# O_APPEND descriptor, which Linux never interleaves with another writer's line on a local file system,
# so there is no lock (tests/test_hook_script.py checks the single write with strace and runs 300 hooks
# of 100 KB, 16 at once). Time is linear in the payload size.
# Without bash 5 (macOS's bash 3.2, busybox) it falls back to `date` for the clock, `tr` for the
# payload and a lock (flock(1), else an atomic mkdir lock with stale-lock breaking) around the append;
# after ~2 s without the lock the line goes to <spool-dir>/<agent>/pending/<ts>-<pid>.json and the next
# fallback hook that holds the lock moves it into the day file.
# It never writes to stdout (some agents feed hook stdout to the model), starts no Python or Node, and
# exits 0 whatever happens, but for one case: a hard budget limit (docs/budgets.md). While the daemon keeps
# <spool-dir>/.refuse/<agent>.<EventName> (one line "<expiry epoch s> <exit code>", then the reason), the
# call is refused after its line is written: the reason on stderr, that exit code (Claude Code's
# UserPromptSubmit: 2, the prompt is not sent). It costs one file test per call; a file past its expiry (a
# daemon that died; a running one renews it every 30 s and removes it when it stops) refuses nothing.

refuse_file=${3:+$3/.refuse/${1-}.${2-}}
if [ -n "$refuse_file" ] && [ -f "$refuse_file" ]; then exec 8>&2; else refuse_file=; fi
exec >/dev/null 2>&1

refuse_if_due() {  # see the top: the file's exit code while it has not expired, else nothing
  [ -n "$refuse_file" ] || return 0
  { read -r expires code && read -r reason; } <"$refuse_file" || return 0
  case $expires in '' | *[!0-9]*) return 0 ;; esac
  case $code in '' | *[!0-9]*) return 0 ;; esac
  now=${EPOCHREALTIME:-$(date +%s)}
  [ "${now%.*}" -lt "$expires" ] || return 0
  printf '%s\n' "$reason" >&8
  exit "$code"
}
umask 077
LC_ALL=C
export LC_ALL

safe_name() {  # ids and event names become path parts and JSON strings: keep them plain
  case $1 in
    '' | .* | *[!A-Za-z0-9._:-]*) return 1 ;;
  esac
  return 0
}

# ------------------------------------------------------------------------------------------------------
# Fallback for shells without $EPOCHREALTIME: POSIX sh, three programs (date, tr, flock), a lock.
if [ -z "${BASH_VERSION:-}" ] || [ -z "${EPOCHREALTIME:-}" ]; then
  if [ -z "${AGENT_COLLECTOR_HOOK_NO_BASH:-}" ] && [ -z "${AGENT_COLLECTOR_HOOK_REEXEC:-}" ] \
    && command -v bash >/dev/null 2>&1; then
    AGENT_COLLECTOR_HOOK_REEXEC=1
    export AGENT_COLLECTOR_HOOK_REEXEC  # bash 3.2 comes back here once, then takes this path
    exec bash "$0" "$@"
  fi

  drain_pending() {  # under the lock: lines that could not be appended earlier go first
    [ -d "$dir/pending" ] || return 0
    for f in "$dir"/pending/*.json; do
      [ -f "$f" ] || continue
      cat "$f" >>"$target" && rm -f "$f"
    done
  }

  append() {
    drain_pending
    printf '%s\n' "$line" >>"$target"
  }

  to_pending() {  # complete file first, then an atomic rename: a drainer never sees half a line
    mkdir -p "$dir/pending" || return 0
    printf '%s\n' "$line" >"$dir/pending/.$ts-$$.tmp" && mv -f "$dir/pending/.$ts-$$.tmp" "$dir/pending/$ts-$$.json"
  }

  append_flock() {  # the lock lives on fd 9 for the duration of the braces
    {
      if flock -w 2 9; then
        append || to_pending
      else
        to_pending
      fi
    } 9>>"$dir/.lock"
  }

  break_stale_lock() {  # a holder that died leaves its lock dir: move it aside (atomic) and drop it
    holder=''
    [ -f "$lockd/pid" ] && read -r holder <"$lockd/pid"
    if [ -n "$holder" ]; then
      kill -0 "$holder" 2>/dev/null && return 0
    elif [ "$1" != old ]; then
      return 0  # a live holder writes its pid right after mkdir; give it one more round
    fi
    mv "$lockd" "$lockd.stale.$$" && rm -rf "$lockd.stale.$$"
  }

  append_mkdir() {
    if sleep 0.01 2>/dev/null; then
      nap=0.01 max_tries=200 stale_every=25
    else
      nap=1 max_tries=2 stale_every=1  # no fractional sleep: two 1 s naps, then pending
    fi
    lockd="$dir/.lock.d"
    tries=0
    while ! mkdir "$lockd" 2>/dev/null; do
      tries=$((tries + 1))
      [ "$tries" -ge "$max_tries" ] && { to_pending; return; }
      case $((tries % stale_every)) in
        0) if [ "$tries" -ge $((2 * stale_every)) ]; then break_stale_lock old; else break_stale_lock; fi ;;
      esac
      sleep "$nap" 2>/dev/null || sleep 1
    done
    echo $$ >"$lockd/pid"
    trap 'rm -rf "$lockd"; exit 0' INT TERM HUP
    append || to_pending
    rm -rf "$lockd"
    trap - INT TERM HUP
  }

  read_payload() {  # the whole input, CR/LF as spaces; under `timeout` when there is one
    if [ -n "${4+set}" ]; then
      printf '%s' "$4" | tr '\r\n' '  '
    elif [ -t 0 ]; then
      :
    elif command -v timeout >/dev/null 2>&1; then
      timeout -k 1 "${AGENT_COLLECTOR_HOOK_TIMEOUT:-2}" tr '\r\n' '  '
    else
      tr '\r\n' '  '
    fi
  }

  posix_context() {  # the invocation attributes and trace context (see the top), as JSON strings or false
    v=${AGENT_COLLECTOR_ATTRIBUTES:-${LOONGSUITE_PILOT_SPAN_ATTRIBUTES-}}
    if [ -n "$v" ]; then
      case $v in
        *[[:cntrl:]\"\\]*) v=false ;;
        *) if [ "${#v}" -le 1024 ]; then v="\"$v\""; else v=false; fi ;;
      esac
      head="$head,\"attributes\":$v"
    fi
    v=${TRACEPARENT-}
    if [ -n "$v" ]; then
      case $v in
        *[!0-9a-f-]*) v=false ;;
        *) if [ "${#v}" -le 128 ]; then v="\"$v\""; else v=false; fi ;;
      esac
      head="$head,\"traceparent\":$v"
    fi
  }

  posix_main() {
    [ $# -ge 3 ] || return 0
    agent=$1 event=$2 spool=$3
    safe_name "$agent" || return 0
    safe_name "$event" || event=invalid-event-name
    [ -n "$spool" ] || return 0

    now=$(date -u '+%s.%N %Y-%m-%d')
    ts=${now% *} day=${now#* }
    case $ts in *[!0-9.]* | *.) ts=${ts%%.*} ;; esac  # no %N (BSD date): whole seconds

    dir="$spool/$agent"
    [ -d "$dir" ] || mkdir -p "$dir" || return 0
    target="$dir/$agent-$day.jsonl"
    head="{\"ts\":$ts,\"agent\":\"$agent\",\"event\":\"$event\""
    posix_context

    payload=$(read_payload "$@")
    case $? in
      0)
        case $payload in *[![:space:]]*) ;; *) payload=null ;; esac
        line="$head,\"payload\":$payload}"
        ;;
      124 | 137) line="$head,\"dropped\":\"timeout\"}" ;;
      *) line="$head,\"dropped\":\"error\"}" ;;  # tr or timeout(1) failed
    esac

    if [ -z "${AGENT_COLLECTOR_HOOK_NO_FLOCK:-}" ] && command -v flock >/dev/null 2>&1; then
      append_flock
    else
      append_mkdir
    fi
  }

  posix_main "$@"
  refuse_if_due
  exit 0
fi

# ------------------------------------------------------------------------------------------------------
# bash 5: no program for the common case, no lock.
shopt -s extglob

drop() {  # one small line (one write): the daemon counts it
  printf '%s' "$head,\"dropped\":\"$1\"}"$'\n' >>"$target"
  exit 0
}

watchdog() {  # a forked bash (no program): ALRM at the cap; ends as soon as this process ends (EOF)
  exec {watch}> >(read -r -t "$cap" _; (($? > 128)) && kill -ALRM $$)
}

capped() {  # a program under timeout(1) at the cap, where there is a timeout(1)
  if command -v timeout >/dev/null; then
    timeout -k 1 "$cap" "$@"
  else
    "$@"
  fi
}

read_first() {  # the payload, or its first 4096 bytes (then it returns 0: the rest is still on stdin)
  local rc=1
  payload=
  if [[ -n ${4+set} ]]; then
    payload=$4
    ((${#payload} >= 4096)) && payload=$(printf '%s' "$payload" | tr '\r\n' '  ' {watch}>&-)
  elif [[ ! -t 0 ]]; then
    IFS= read -r -N 4096 payload
    rc=$?
  fi
  [[ $payload == *[$'\r\n']* ]] && payload=${payload//[$'\r\n']/ }  # at most 4096 bytes here
  ((rc == 0)) && return 0
  [[ $payload == *[![:space:]]* ]] || payload=null
  return 1
}

write_line() {  # a payload read whole: one write(2) of the line, on O_APPEND
  local line="$head,\"payload\":$payload}"$'\n'
  trap 'exit 0' ALRM TERM INT HUP  # from here on the line is written whole, then it exits
  if ((${#line} <= 4096)); then
    printf '%s' "$line" >>"$target"  # glibc's stdout buffer is 4096 bytes here: one write
  else
    printf '%s' "$line" | dd of="$target" oflag=append conv=notrunc bs=64M iflag=fullblock status=none {watch}>&- \
      || printf '%s' "$line" >>"$target"  # a dd without these options: best effort, two writes
  fi
}

write_stream() {  # a big payload never enters bash: the rest of stdin goes through tr into ONE dd write
  local out writer
  trap 'exit 0' ALRM TERM INT HUP  # the subshell below completes the line or drops it, whatever we get
  exec {out}> >(exec dd of="$target" oflag=append conv=notrunc bs=64M iflag=fullblock status=none {watch}>&-)
  writer=$!  # dd writes once, at the end of its input: only after "}\n", or never (killed)
  (
    printf '%s' "$head,\"payload\":$payload"
    capped tr '\r\n' '  '
    case $? in
      0) printf '}\n' ; exit ;;
      124 | 137) reason=timeout ;;
      *) reason=error ;;  # tr or timeout(1) failed
    esac
    kill -KILL "$writer"
    printf '%s' "$head,\"dropped\":\"$reason\"}"$'\n' >>"$target"
  ) >&"$out" {watch}>&-
  exec {out}>&-
  wait "$writer"
}

context() {  # the invocation attributes and trace context (see the top), as JSON strings or false
  local v=${AGENT_COLLECTOR_ATTRIBUTES:-${LOONGSUITE_PILOT_SPAN_ATTRIBUTES-}}
  if [[ -n $v ]]; then
    if ((${#v} > 1024)) || [[ $v == *[[:cntrl:]\"\\]* ]]; then v=false; else v="\"$v\""; fi
    head+=",\"attributes\":$v"
  fi
  v=${TRACEPARENT-}
  if [[ -n $v ]]; then
    if ((${#v} > 128)) || [[ $v == *[!0-9a-f-]* ]]; then v=false; else v="\"$v\""; fi
    head+=",\"traceparent\":$v"
  fi
}

bash_main() {
  (($# >= 3)) || return 0
  local agent=$1 event=$2 spool=$3 ts day dir payload
  safe_name "$agent" || return 0
  safe_name "$event" || event=invalid-event-name
  [[ -n $spool ]] || return 0

  ts=$EPOCHREALTIME
  cap=${AGENT_COLLECTOR_HOOK_TIMEOUT:-2}
  [[ $cap == +([0-9])?(.+([0-9])) ]] || cap=2
  export TZ=UTC0
  printf -v day '%(%Y-%m-%d)T' "${ts%.*}"
  dir=$spool/$agent
  [[ -d $dir ]] || mkdir -p "$dir" || return 0
  target=$dir/$agent-$day.jsonl
  head="{\"ts\":$ts,\"agent\":\"$agent\",\"event\":\"$event\""
  [[ -n ${AGENT_COLLECTOR_ATTRIBUTES-}${LOONGSUITE_PILOT_SPAN_ATTRIBUTES-}${TRACEPARENT-} ]] && context

  trap 'drop timeout' ALRM
  trap 'drop signal' TERM INT HUP
  watchdog
  if read_first "$@"; then
    write_stream
  else
    write_line
  fi
}

bash_main "$@"
refuse_if_due
exit 0
