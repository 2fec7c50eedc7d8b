#!/bin/sh
# agent-collector hook: append one line per hook call to the spool, and nothing else.
#
#   sh agent-collector-hook.sh <agent-id> <EventName> <spool-dir>           (payload on stdin)
#   sh agent-collector-hook.sh <agent-id> <EventName> <spool-dir> '<json>'  (payload as last argv:
#                                                                            Codex `notify`)
#
# Line written to <spool-dir>/<agent>/<agent>-YYYY-MM-DD.jsonl (UTC day):
#   {"ts":<epoch s.fraction>,"agent":"<id>","event":"<EventName>","payload":<payload JSON>}
# - payload is null when the input is empty or only whitespace;
# - newlines and CRs in the payload become spaces (valid JSON has them only between tokens);
# - input that is not valid JSON is kept as a string: "payload":null,"payload_raw":"<text>".
# Lines never interleave: the whole line is built first (in memory, before any lock is taken), then
# appended under a lock (flock(1) when present, else an atomic mkdir lock with stale-lock breaking). After
# ~2 s without the lock the line goes to <spool-dir>/<agent>/pending/<ts>-<pid>.json instead; the next
# hook that holds the lock moves pending lines into the day file, so nothing is lost and readers only
# read day files. It never writes to stdout (some agents feed hook stdout to the model), starts no Python
# or Node (only date, awk and flock: process start-up is its whole cost), and exits 0 whatever happens.

exec >/dev/null 2>&1
umask 077
LC_ALL=C
export LC_ALL

# The JSON check: split on quotes to find the strings (escapes and control characters checked with
# plain scans: a regex over one long string is slow in mawk), keep a skeleton with S for each string,
# then numbers and literals become N and containers of S/N collapse until one value is left.
# Prints the envelope line. Agrees with Python's strict json.loads on 3000 fuzzed inputs.
AWK_PROG='
function string_ok(q) {
  gsub(/\\["\\\/bfnrt]|\\u[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]/, "", q)
  return !index(q, "\\") && !match(q, /[\001-\037]/)
}
function valid(s,   n, parts, i, out, chunk, k, p, inside, q, prev) {
  n = split(s, parts, "\"")
  out = chunk = ""
  inside = k = 0
  for (i = 1; i <= n; i++) {
    p = parts[i]
    if (inside) {
      q = q p
      if (match(p, /\\+$/) && RLENGTH % 2 == 1) { q = q "\""; continue }  # an escaped quote
      if (i == n || !string_ok(q)) return 0
      p = "S"
    }
    chunk = chunk p
    if (++k % 64 == 0) { out = out chunk; chunk = "" }  # keeps concatenation linear
    inside = !inside
    q = ""
  }
  if (!inside) return 0
  s = out chunk
  gsub(/-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/, "N", s)
  gsub(/true|false|null/, "N", s)
  gsub(/[ \t]+/, "", s)
  do {
    prev = s
    gsub(/\[\]|\{\}/, "N", s)
    gsub(/\[[SN](,[SN])*\]/, "N", s)
    gsub(/\{S:[SN](,S:[SN])*\}/, "N", s)
  } while (s != prev)
  return s == "N" || s == "S"
}
function replace_all(s, sep, rep,   n, parts, i, out) {  # split/join: no gsub escape rules
  n = split(s, parts, sep)
  out = parts[1]
  for (i = 2; i <= n; i++) out = out rep parts[i]
  return out
}
function quote(s) {
  s = replace_all(s, "\\", "\\\\")
  s = replace_all(s, "\"", "\\\"")
  s = replace_all(s, "\t", "\\t")
  gsub(/[\001-\037]/, " ", s)
  return "\"" s "\""
}
BEGIN { RS = "\001" }  # no such byte in JSON: the whole input is one record
{ text = (NR == 1) ? $0 : text "\001" $0 }
END {
  gsub(/[\r\n]/, " ", text)  # valid JSON has newlines only between tokens
  sub(/^[ \t]+/, "", text)
  sub(/[ \t]+$/, "", text)
  head = "{\"ts\":" ts ",\"agent\":\"" agent "\",\"event\":\"" event "\",\"payload\":"
  if (text == "") print head "null}"
  else if (valid(text)) print head text "}"
  else print head "null,\"payload_raw\":" quote(text) "}"
}'

safe_name() {  # ids and event names become path parts and JSON strings: keep them plain
  case $1 in
    '' | .* | *[!A-Za-z0-9._:-]*) return 1 ;;
  esac
  return 0
}

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

main() {
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

  if [ $# -ge 4 ]; then
    line=$(printf '%s' "$4" | awk -v ts="$ts" -v agent="$agent" -v event="$event" "$AWK_PROG")
  elif [ -t 0 ]; then
    line=$(awk -v ts="$ts" -v agent="$agent" -v event="$event" "$AWK_PROG" </dev/null)
  else
    line=$(awk -v ts="$ts" -v agent="$agent" -v event="$event" "$AWK_PROG")
  fi
  [ -n "$line" ] || return 0

  if [ -z "${AGENT_COLLECTOR_HOOK_NO_FLOCK:-}" ] && command -v flock >/dev/null 2>&1; then
    append_flock
  else
    append_mkdir
  fi
}

main "$@"
exit 0
