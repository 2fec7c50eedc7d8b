// agent-collector:managed. Written by `agent-collector install`; `agent-collector uninstall` removes it.
//
// pi has no command hooks; this extension (pi loads every *.ts in ~/.pi/agent/extensions with jiti) is
// the equivalent of hooks/agent-collector-hook.sh. It appends one line per lifecycle event to the
// agent-collector spool, the same envelope the hook script writes:
//   {"ts":<epoch seconds>,"agent":"pi","event":"<name>","payload":{session_id, session_file, cwd, ...}}
// to <spool>/pi/pi-YYYY-MM-DD.jsonl (UTC day). <spool> is $AGENT_COLLECTOR_SPOOL_DIR, else the directory
// baked in at install time. Each line is one synchronous O_APPEND write. Only node:fs is imported, no
// handler returns anything (nothing is blocked or changed) and nothing here throws.
//
// Events written: session_start, prompt (a user message, with pi's own timestamp), turn_start, turn_end
// (the assistant message with its usage and response id), tool_call, tool_result, agent_end (the stop
// reason of the last assistant message instead of the whole history), session_compact, session_shutdown.
import { appendFileSync, mkdirSync } from "node:fs";

const AGENT = @@AGENT_ID@@;
const SPOOL_DIR = (process.env.AGENT_COLLECTOR_SPOOL_DIR || @@SPOOL_DIR@@) + "/" + AGENT;
// The run's context from this process's environment, as the hook script copies it (the top of
// hooks/agent-collector-hook.sh): the attributes (AGENT_COLLECTOR_ATTRIBUTES, else LoongSuite Pilot's
// LOONGSUITE_PILOT_SPAN_ATTRIBUTES) and the caller's TRACEPARENT, false when too long; the daemon checks
// them (collector/pipeline/invocation.py).
const CONTEXT = {};
const ATTRIBUTES = process.env.AGENT_COLLECTOR_ATTRIBUTES || process.env.LOONGSUITE_PILOT_SPAN_ATTRIBUTES;
if (ATTRIBUTES) CONTEXT.attributes = ATTRIBUTES.length <= 1024 ? ATTRIBUTES : false;
const TRACEPARENT = process.env.TRACEPARENT;
if (TRACEPARENT) CONTEXT.traceparent = TRACEPARENT.length <= 128 ? TRACEPARENT : false;

let dirReady = false;

function line(event, payload, now) {
  try {
    return JSON.stringify({ ts: now / 1000, agent: AGENT, event, ...CONTEXT, payload });
  } catch (err) {
    return JSON.stringify({ ts: now / 1000, agent: AGENT, event, payload: null, payload_error: String(err) });
  }
}

function session(ctx) {
  const out = {};
  try {
    const manager = ctx && ctx.sessionManager;
    out.session_id = manager && manager.getSessionId ? manager.getSessionId() : undefined;
    out.session_file = manager && manager.getSessionFile ? manager.getSessionFile() : undefined;
    out.cwd = ctx && ctx.cwd;
  } catch (err) {
    // the line without the session is still worth writing
  }
  return out;
}

function record(event, fields, ctx) {
  try {
    const now = Date.now();
    const text = line(event, { ...session(ctx), ...fields }, now) + "\n";
    if (!dirReady) {
      mkdirSync(SPOOL_DIR, { recursive: true, mode: 0o700 });
      dirReady = true;
    }
    const day = new Date(now).toISOString().slice(0, 10);
    appendFileSync(SPOOL_DIR + "/" + AGENT + "-" + day + ".jsonl", text, { mode: 0o600 });
  } catch (err) {
    // never break the agent: a lost line is better than a failed turn
  }
}

function lastStopReason(messages) {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message && message.role === "assistant") return message.stopReason;
  }
  return undefined;
}

// Whether the session already holds messages when it starts: `pi --continue` (or /resume) took it up again.
function hasMessages(ctx) {
  try {
    const entries = ctx.sessionManager.getEntries();
    return Array.isArray(entries) && entries.some((entry) => entry && entry.type === "message");
  } catch (err) {
    return undefined;
  }
}

function on(pi, name, build) {
  pi.on(name, (event, ctx) => {
    try {
      const fields = build(event || {}, ctx);
      if (fields) record(fields.event || name, fields.payload, ctx);
    } catch (err) {
      // ignore
    }
  });
}

export default function agentCollector(pi) {
  on(pi, "session_start", (e, ctx) => ({
    payload: { reason: e.reason, previousSessionFile: e.previousSessionFile, resumed: hasMessages(ctx) },
  }));
  on(pi, "message_end", (e) => {
    const message = e.message || {};
    if (message.role !== "user") return undefined;
    return { event: "prompt", payload: { message } };
  });
  on(pi, "turn_start", (e) => ({ payload: { turnIndex: e.turnIndex, timestamp: e.timestamp } }));
  on(pi, "turn_end", (e) => ({ payload: { turnIndex: e.turnIndex, message: e.message } }));
  on(pi, "tool_call", (e) => ({ payload: { toolName: e.toolName, toolCallId: e.toolCallId, input: e.input } }));
  on(pi, "tool_result", (e) => ({
    payload: { toolName: e.toolName, toolCallId: e.toolCallId, content: e.content, isError: e.isError },
  }));
  on(pi, "agent_end", (e) => ({ payload: { stopReason: lastStopReason(e.messages) } }));
  on(pi, "session_compact", (e) => ({ payload: { fromExtension: e.fromExtension } }));
  on(pi, "session_shutdown", (e) => ({ payload: { reason: e.reason } }));
}
