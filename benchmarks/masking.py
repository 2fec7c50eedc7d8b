#!/usr/bin/env python3
"""Secret masking: recall and false positives on the corpus in tests/fixtures/secrets, and throughput with
every shipped rule on, over realistic session text (the entries the pipeline makes of every agent's
fixture sessions, content captured, their content fields refilled with the real text of the fixture
transcripts: prompts, answers, tool output, the agents' system prompts and tool descriptions).

Also prints what the prefilter choice was measured against: the same keyword pass done by Python's re
on a literal alternation, by str.find per keyword, and by pyahocorasick when installed.

    .venv/bin/python benchmarks/masking.py [--mb 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _session_entries import realistic_entries, string_bytes  # noqa: E402

from collector.pipeline.masking import Masker, default_masker, load_rules  # noqa: E402

CORPUS = HERE.parent / "tests" / "fixtures" / "secrets"


def corpus_figures(masker: Masker) -> tuple[float, float, int, int, int]:
    positives = [json.loads(x) for x in (CORPUS / "positives.jsonl").read_text().splitlines()]
    negatives = [json.loads(x) for x in (CORPUS / "negatives.jsonl").read_text().splitlines()]
    caught = 0
    for sample in positives:
        if sample["context"] == "key":
            out = str(next(iter(masker.mask_value({sample["text"]: 1}))))
        else:
            out = masker.mask_text(sample["text"])
        caught += sample["secret"] not in out
    wrong = sum(masker.mask_text(n["text"]) != n["text"] for n in negatives)
    types = len({p["type"] for p in positives})
    return caught / len(positives), wrong / len(negatives), len(positives), types, len(negatives)


def timed(masker: Masker, entries: list[dict[str, Any]], runs: int) -> tuple[float, float]:
    """Best (CPU seconds, wall seconds) of ``runs`` passes of mask_entry over fresh copies."""
    best_cpu = best_wall = float("inf")
    blob = [orjson.dumps(e) for e in entries]
    for _ in range(runs):
        work = [orjson.loads(b) for b in blob]
        cpu, wall = time.process_time(), time.perf_counter()
        for entry in work:
            masker.mask_entry(entry)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return best_cpu, best_wall


def prefilter_choices(masker: Masker, entries: list[dict[str, Any]]) -> list[tuple[str, float | None]]:
    """MB/s of the keyword pass alone (one pass per entry over its strings) by each candidate matcher."""
    keywords = sorted({k.lower() for r in masker.rules.rules for k in r.keywords}, key=len, reverse=True)
    blobs = [orjson.dumps([v for k, v in e.items() if not k.startswith(("event.", "gen_ai.session"))]) for e in entries]
    texts = [b.decode() for b in blobs]
    size = sum(len(b) for b in blobs) / 1e6

    def rate(fn: Callable[[], object]) -> float:
        start = time.process_time()
        fn()
        return size / max(time.process_time() - start, 1e-9)

    flagged = sum(bool(masker.rules.candidates(b)) for b in blobs) / len(blobs) * 100
    out: list[tuple[str, float | None]] = [
        (f"google-re2 set (chosen; flags {flagged:.0f} % of entries)",
         rate(lambda: [masker.rules.candidates(b) for b in blobs]))]
    alternation = re.compile("|".join(re.escape(k) for k in keywords), re.IGNORECASE)
    out.append(("re, literal alternation", rate(lambda: [alternation.search(t) for t in texts])))
    out.append(("str.find per keyword", rate(lambda: [[k in t.lower() for k in keywords] for t in texts])))
    try:
        import ahocorasick  # type: ignore[import-not-found]
    except ImportError:
        out.append(("pyahocorasick", None))
    else:
        automaton = ahocorasick.Automaton()
        for keyword in keywords:
            automaton.add_word(keyword, keyword)
        automaton.make_automaton()
        hits = sum(next(automaton.iter(t.lower()), None) is not None for t in texts) / len(texts) * 100
        out.append((f"pyahocorasick (keywords only; flags {hits:.0f} %)",
                     rate(lambda: [next(automaton.iter(t.lower()), None) for t in texts])))
    return out


def dense_keywords(masker: Masker) -> list[tuple[str, float]]:
    """MB/s on 1 MB of one keyword repeated (every rule's worst case is its keyword at every step)."""
    cases = {"key=": "key=", "password: ": "password: ", "sk-": "sk-", "token is x ": "token is x ",
             "-----BEGIN PRIVATE KEY-----": "-----BEGIN PRIVATE KEY-----\n", "Basic ": "Basic ",
             "--password ": "--password ", '"password": "x...': '"password": "' + "x" * 150}
    out = []
    for name, unit in cases.items():
        text = unit * (1_000_000 // len(unit))
        start = time.process_time()
        masker.mask_text(text)
        out.append((name, len(text) / 1e6 / max(time.process_time() - start, 1e-9)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=16.0, help="MB of strings in the session text")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    masker = default_masker()
    recall, fp_rate, n_pos, n_types, n_neg = corpus_figures(masker)
    print(f"rules: {len(masker.rules.rules)}")
    print(f"corpus: {n_pos} secrets of {n_types} types, {n_neg} ordinary lines")
    print(f"recall: {recall * 100:.2f} %   false positives: {fp_rate * 100:.2f} %")

    entries = realistic_entries(int(args.mb * 1e6))
    size = sum(string_bytes(e) for e in entries) / 1e6
    json_size = sum(len(orjson.dumps(e)) for e in entries) / 1e6
    print(f"session text: {len(entries)} entries, {size:.1f} MB of strings ({json_size:.1f} MB as JSON)")
    cpu, wall = timed(masker, entries, args.runs)
    print(f"masking, every rule, prefiltered: {size / cpu:.1f} MB/s per CPU second ({size / wall:.1f} MB/s wall)")
    plain = Masker(load_rules(), prefilter=False)
    sample = entries[: max(1, len(entries) // 40)]
    sample_size = sum(string_bytes(e) for e in sample) / 1e6
    cpu_plain, _ = timed(plain, sample, 1)
    print(f"masking, every rule, plain (no prefilter, whole strings): {sample_size / cpu_plain:.2f} MB/s per CPU s")
    changed = 0
    for entry in entries[:2000]:
        copy = orjson.loads(orjson.dumps(entry))
        changed += masker.mask_entry(copy) != entry
    print(f"entries changed by masking (of the first {min(2000, len(entries))}): {changed}")
    worst = min(dense_keywords(masker), key=lambda case: case[1])
    print(f"worst dense-keyword text (1 MB of {worst[0]!r} repeated): {worst[1]:.1f} MB/s per CPU s")
    print("keyword pass alone, MB/s per CPU second of the entries' JSON:")
    for name, mbps in prefilter_choices(masker, entries[:3000]):
        print(f"  {name:50s} {'not installed' if mbps is None else f'{mbps:8.1f}'}")


if __name__ == "__main__":
    main()
