// agent-collector:managed. Written by `agent-collector install`; `agent-collector uninstall` removes it.
//
// OpenCode has no command hooks; this plugin is the equivalent of hooks/agent-collector-hook.sh. It
// appends one line per event to the agent-collector spool, the same envelope the hook script writes:
//   {"ts":<epoch seconds>,"agent":"opencode","event":"<name>","payload":<event or {input,output}>}
// to <spool>/opencode/opencode-YYYY-MM-DD.jsonl (UTC day). <spool> is $AGENT_COLLECTOR_SPOOL_DIR, else
// the directory baked in at install time. Each line is one synchronous O_APPEND write, so lines of
// concurrent OpenCode processes do not interleave. Only node:fs is imported, and nothing here throws.
// Besides the hooks and bus events, it writes one "plugin.dispose" line per session this process ran when
// OpenCode disposes it (at exit), and names the tool call in question.replied / question.rejected (the
// reply names only the request; question.asked named both).
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
const BUS_EVENTS = new Set([
  "session.created", "session.updated", "session.idle", "session.status", "session.error", "session.deleted",
  "message.updated", "message.part.updated", "permission.asked", "permission.updated", "permission.replied",
  "question.asked", "question.replied", "question.rejected",
]); // message.part.delta (streamed text) is noise: message.part.updated carries the result
const MAX_REMEMBERED = 256;

let dirReady = false;
// Sessions this OpenCode process took part in (closed in the spool when OpenCode disposes the plugin),
// and the tool call each open question belongs to (its reply names only the request).
const sessions = new Set();
const questionCalls = new Map();

function line(event, payload, now) {
  try {
    const body = payload === undefined ? null : payload;
    return JSON.stringify({ ts: now / 1000, agent: AGENT, event, ...CONTEXT, payload: body });
  } catch (err) {
    return JSON.stringify({ ts: now / 1000, agent: AGENT, event, payload: null, payload_error: String(err) });
  }
}

function record(event, payload) {
  try {
    const now = Date.now();
    const text = line(event, payload, now) + "\n";
    if (!dirReady) {
      mkdirSync(SPOOL_DIR, { recursive: true, mode: 0o700 });
      dirReady = true;
    }
    const day = new Date(now).toISOString().slice(0, 10);
    appendFileSync(SPOOL_DIR + "/" + AGENT + "-" + day + ".jsonl", text, { mode: 0o600 });
  } catch (err) {
    // never break the agent: a lost line is better than a failed tool call
  }
}

function remember(set, key, value) {
  if (typeof key !== "string" || !key) return;
  set.delete(key);
  if (set instanceof Map) set.set(key, value);
  else set.add(key);
  if (set.size > MAX_REMEMBERED) set.delete(set.keys().next().value);
}

function sessionOf(event) {
  const props = (event && event.properties) || {};
  return props.sessionID || (props.info && props.info.id);
}

// A question's reply carries only its request id: add the tool call it belongs to, as question.asked said.
function withQuestionCall(event) {
  const props = event.properties || {};
  if (event.type === "question.asked") {
    remember(questionCalls, props.id, props.tool && props.tool.callID);
    return event;
  }
  const callID = questionCalls.get(props.requestID);
  questionCalls.delete(props.requestID);
  return callID ? { ...event, properties: { ...props, tool: { ...(props.tool || {}), callID } } } : event;
}

function onEvent(event) {
  if (!event || !BUS_EVENTS.has(event.type)) return;
  if (event.type === "session.deleted") sessions.delete(sessionOf(event));
  else remember(sessions, sessionOf(event));
  record(event.type, event.type.startsWith("question.") ? withQuestionCall(event) : event);
}

function withSession(name, input, output) {
  try {
    remember(sessions, input && input.sessionID);
  } catch (err) {
    // ignore: the line below matters more
  }
  record(name, { input, output });
}

export const AgentCollectorPlugin = async () => ({
  event: async ({ event } = {}) => {
    try {
      onEvent(event);
    } catch (err) {
      // ignore
    }
  },
  // OpenCode disposes its plugins when the process ends: each session it ran here is over (for now).
  dispose: async () => {
    try {
      for (const sessionID of sessions) record("plugin.dispose", { properties: { sessionID } });
      sessions.clear();
    } catch (err) {
      // ignore
    }
  },
  "chat.message": async (input, output) => withSession("chat.message", input, output),
  // One per model call, the session-title call included. Only what the collector reads: the provider
  // options in `input` can hold an API key, which must never reach the spool.
  "chat.params": async (input, output) => {
    try {
      const model = (input && input.model) || {};
      record("chat.params", {
        input: {
          sessionID: input && input.sessionID,
          agent: input && input.agent,
          model: { id: model.id, providerID: model.providerID },
          message: { id: input && input.message && input.message.id },
        },
        output: { maxOutputTokens: output && output.maxOutputTokens },
      });
    } catch (err) {
      // ignore
    }
  },
  "tool.execute.before": async (input, output) => withSession("tool.execute.before", input, output),
  "tool.execute.after": async (input, output) => withSession("tool.execute.after", input, output),
});
