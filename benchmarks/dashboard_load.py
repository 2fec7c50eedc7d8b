"""Dashboard load time on a usage store of N model calls (default 100,000): what a page load asks the
daemon for (the page, its assets, /v1/usage for 30 and 90 days), over HTTP to a real ingest server
with the dashboard route, timed from the client; then each answer of the views of work alone (the sessions
list: first page, sorted by cost, filtered by agent, a later page, a search; a session's timeline; the
activity), each against the floor of the same run (a static asset over the same server) and the 300 ms goal.
Exits with an error when a view did no work (no session listed, an empty timeline, an
activity that does not add up to the store's calls). Also `report daily` and `report session` on the store.

The store is synthetic but shaped like real use: 5 agents, 8 models, 2,000 sessions in 60 projects over
90 days, each session a few hours long (its calls within 3 hours of its start) on one model, its input
growing call by call as the context does (to 20k-260k tokens, so long-context tiers too), each call with
cache reads and writes, a tool call per call, a failure in 20."""

from __future__ import annotations

import argparse
import http.client
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.live import ThreadedIngest  # noqa: E402

from collector.dashboard.auth import SESSION_HEADER  # noqa: E402

AGENTS = {"claude-code": ("anthropic", ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]),
          "codex": ("openai", ["gpt-5.5", "gpt-5-codex"]), "gemini-cli": ("gcp.gemini", ["gemini-2.5-pro"]),
          "qwen-code": ("openai", ["qwen3-coder-plus"]), "opencode": ("anthropic", ["claude-sonnet-4-5"])}


def build_store(path: Path, calls: int, seed: int = 7) -> None:
    from collector.usage.store import UsageStore

    rng = random.Random(seed)
    now = time.time()
    store = UsageStore(path)
    batch = []
    sessions = [(rng.choice(list(AGENTS)), f"s{i:05d}", f"/home/dev/src/project-{i % 60:02d}",
                 now - rng.uniform(3 * 3600, 90 * 86400)) for i in range(2000)]
    model_of = {s[1]: rng.choice(AGENTS[s[0]][1]) for s in sessions}
    peak = {s[1]: rng.randint(20_000, 260_000) for s in sessions}
    for agent, session, project, start in sessions:
        batch.append({"event.id": f"start-{session}", "event.name": "session.start", "gen_ai.agent.type": agent,
                      "time_unix_nano": int(start * 1e9), "gen_ai.session.id": session, "workspace.path": project})
    for i in range(calls):
        agent, session, _, start = sessions[rng.randrange(len(sessions))]
        provider, models = AGENTS[agent]
        offset = rng.uniform(0, 3 * 3600)
        t = int((start + offset) * 1e9)
        inp = int(5_000 + (peak[session] - 5_000) * offset / (3 * 3600))
        cr, cw = int(inp * 0.7), int(inp * 0.1)
        common = {"gen_ai.agent.type": agent, "gen_ai.session.id": session, "time_unix_nano": t}
        batch.append({**common, "event.id": f"c{i}", "event.name": "llm.response", "gen_ai.provider.name": provider,
                      "gen_ai.response.model": model_of[session], "gen_ai.usage.input_tokens": inp,
                      "gen_ai.usage.output_tokens": rng.randint(10, 4000),
                      "gen_ai.usage.cache_read.input_tokens": cr, "gen_ai.usage.cache_creation.input_tokens": cw})
        batch.append({**common, "event.id": f"t{i}", "event.name": "tool.call", "gen_ai.tool.name": "Bash"})
        batch.append({**common, "event.id": f"r{i}", "event.name": "tool.result", "gen_ai.tool.name": "Bash",
                      "tool.result.status": "error" if i % 20 == 0 else "success"})
        if len(batch) >= 20_000:
            store.add(batch)
            batch = []
    store.add(batch)
    store.close()


def timed_get(port: int, path: str, token: str) -> tuple[float, int, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    start = time.perf_counter()
    conn.request("GET", path, headers={SESSION_HEADER: token, "Sec-Fetch-Site": "same-origin"})
    answer = conn.getresponse()
    body = answer.read()
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed, answer.status, len(body)


GOAL_MS = 300.0


def _median_ms(port: int, path: str, token: str, repeat: int) -> tuple[float, float, bytes]:
    """Median and max of ``repeat`` GETs (after one to warm the price tables), and the last body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times, body = [], b""
    for i in range(repeat + 1):
        start = time.perf_counter()
        conn.request("GET", path, headers={SESSION_HEADER: token, "Sec-Fetch-Site": "same-origin"})
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise SystemExit(f"GET {path} answered {answer.status}: {body[:200]!r}")
        if i:
            times.append((time.perf_counter() - start) * 1000)
    conn.close()
    return statistics.median(times), max(times), body


def work(port: int, token: str, calls: int, repeat: int) -> None:
    """The views of work, each against the floor; SystemExit when one did no work or missed the goal."""
    import json

    floor, _, _ = _median_ms(port, "/dashboard/app.css", token, repeat)
    print(f"floor (GET /dashboard/app.css): median {floor:.1f} ms")
    listed = json.loads(_median_ms(port, "/v1/usage/sessions?days=366&sort=cost", token, 1)[2])
    if not listed["total"] or not listed["rows"]:
        raise SystemExit("the sessions list listed nothing: no figure")
    top = listed["rows"][0]
    paths = {"sessions, page 1 by cost (90 days)": "/v1/usage/sessions?days=90&sort=cost",
             "sessions, 366 days by start": "/v1/usage/sessions?days=366",
             "sessions, agent codex by tokens": "/v1/usage/sessions?days=366&agent=codex&sort=tokens",
             "sessions, page 20": "/v1/usage/sessions?days=366&offset=950",
             "sessions, search 'sonnet'": "/v1/usage/sessions?days=366&q=sonnet",
             "timeline of the costliest session": f"/v1/usage/timeline?agent={top['agent']}&session={top['session']}",
             "activity, 90 days": "/v1/usage/activity?days=90"}
    missed = []
    for label, path in paths.items():
        median, most, body = _median_ms(port, path, token, repeat)
        answer = json.loads(body)
        _check_work(label, answer, top, calls)
        print(f"{label}: median {median:.0f} ms, max {most:.0f} ms, {median / floor:.0f}x the floor "
              f"({len(body) / 1024:.0f} KiB)")
        if median > GOAL_MS:
            missed.append(label)
    if missed:
        raise SystemExit(f"above {GOAL_MS:.0f} ms: {', '.join(missed)}")


def _check_work(label: str, answer: dict[str, object], top: dict[str, object], calls: int) -> None:
    if label.startswith("timeline"):
        turns = answer.get("turns")
        if not isinstance(turns, list) or sum(t["calls"] for t in turns) != top["calls"]:
            raise SystemExit(f"{label}: the timeline does not hold the session's {top['calls']} calls")
    elif label.startswith("activity"):
        hours = answer.get("by_hour")
        if not isinstance(hours, list) or not sum(map(sum, hours)):
            raise SystemExit(f"{label}: no activity")
    elif not answer.get("rows"):
        raise SystemExit(f"{label}: no session listed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from zoneinfo import ZoneInfo

    from collector.dashboard.auth import DashboardSessions
    from collector.dashboard.routes import DashboardRoute
    from collector.paths import Paths

    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(Path(tmp) / "home", Path(tmp) / "config", Path(tmp) / "data")
        store = paths.data_dir / "usage.sqlite"
        start = time.perf_counter()
        build_store(store, args.calls)
        print(f"store: {args.calls:,} calls ({3 * args.calls:,} rows), {store.stat().st_size / 2**20:.0f} MiB, "
              f"built in {time.perf_counter() - start:.1f} s")
        sessions = DashboardSessions()
        token, _ = sessions.grant()  # what the page holds after redeeming its login code
        route = DashboardRoute(paths, store, lambda: {"sessions": []}, False, lambda: (ZoneInfo("UTC"), "UTC"),
                               sessions=sessions)
        served = ThreadedIngest(routes=[route])
        try:
            for days in (30, 90):
                loads = []
                for _ in range(args.repeat):
                    total = 0.0
                    for path in ("/dashboard", "/dashboard/app.js", "/dashboard/app.css", f"/v1/usage?days={days}"):
                        elapsed, status, _ = timed_get(served.port, path, token)
                        if status != 200:
                            raise SystemExit(f"GET {path} answered {status}: no figure")
                        total += elapsed
                    loads.append(total)
                print(f"page load, {days} days: median {statistics.median(loads) * 1000:.0f} ms, "
                      f"max {max(loads) * 1000:.0f} ms ({args.repeat} loads)")
            work(served.port, token, args.calls, args.repeat)
        finally:
            served.stop()
        for kind in ("daily", "session"):
            import subprocess

            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "collector", "report", kind, "--store", str(store),
                                   "--timezone", "UTC"], capture_output=True, text=True, check=True)
            print(f"report {kind}: {time.perf_counter() - start:.2f} s ({len(done.stdout.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
