// agent-collector:managed. Written by `agent-collector install`; `agent-collector uninstall` removes it.
//
// OpenCode has no command hooks; this plugin is the equivalent of hooks/agent-collector-hook.sh. It
// appends one line per event to the agent-collector spool, the same envelope the hook script writes:
//   {"ts":<epoch seconds>,"agent":"opencode","event":"<name>","payload":<event or {input,output}>}
// to <spool>/opencode/opencode-YYYY-MM-DD.jsonl (UTC day). <spool> is $AGENT_COLLECTOR_SPOOL_DIR, else
// the directory baked in at install time. Each line is one synchronous O_APPEND write, so lines of
// concurrent OpenCode processes do not interleave. Only node:fs is imported, and nothing here throws.
import { appendFileSync, mkdirSync } from "node:fs";

const AGENT = @@AGENT_ID@@;
const SPOOL_DIR = (process.env.AGENT_COLLECTOR_SPOOL_DIR || @@SPOOL_DIR@@) + "/" + AGENT;
const BUS_EVENTS = new Set([
  "session.created", "session.updated", "session.idle", "session.status", "session.error",
  "message.updated", "message.part.updated", "permission.asked", "permission.updated", "permission.replied",
]); // message.part.delta (streamed text) is noise: message.part.updated carries the result

let dirReady = false;

function line(event, payload, now) {
  try {
    return JSON.stringify({ ts: now / 1000, agent: AGENT, event, payload: payload === undefined ? null : payload });
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

export const AgentCollectorPlugin = async () => ({
  event: async ({ event } = {}) => {
    try {
      if (event && BUS_EVENTS.has(event.type)) record(event.type, event);
    } catch (err) {
      // ignore
    }
  },
  "chat.message": async (input, output) => record("chat.message", { input, output }),
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
  "tool.execute.before": async (input, output) => record("tool.execute.before", { input, output }),
  "tool.execute.after": async (input, output) => record("tool.execute.after", { input, output }),
});
