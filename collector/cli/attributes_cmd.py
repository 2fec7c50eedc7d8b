"""``agent-collector attributes set|unset|list``: the live custom attribute file.

The file is ``<config dir>/attributes.json`` (a JSON object of strings, ``collector.pipeline.attributes``);
the running daemon looks at it at the start of every batch, so a change shows without a restart. Each
change is a read, an edit and an atomic replace under a lock, so two commands at once lose neither's change.
"""

from __future__ import annotations

import argparse
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from collector.cli.common import CommandError, add_home, add_json, checked_config, paths_from, print_json, print_table
from collector.pipeline.attributes import (
    ENV_VARIABLES,
    MAX_ATTRIBUTES,
    attribute_file,
    checked,
    from_environment,
    pair_problem,
    read_file,
)
from collector.util.atomic import atomic_write
from collector.util.private import private_dir

WHAT = ("Custom attributes are stamped on every entry that does not have the key: the config's [attributes], "
        "then OTEL_RESOURCE_ATTRIBUTES and OTEL_SPAN_ATTRIBUTES of the daemon's environment, then this file "
        "(a later one wins for a key). The running daemon stamps a change from its next batch on. Keys are plain "
        "names (letters, digits, '_', '.', '-'; at most 128) outside the collector's own namespaces "
        "(gen_ai., event., session., vcs., git., upstream., ...); values at most 512 characters.")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("attributes", help="custom attributes on every entry: set, unset, list",
                                   description=WHAT)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = actions.add_parser("set", help="add or change attributes in the live file", description=WHAT)
    add_home(put)
    put.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help="e.g. team=platform ticket=OPS-12")
    put.set_defaults(func=cmd_set)
    drop = actions.add_parser("unset", help="remove attributes from the live file", description=WHAT)
    add_home(drop)
    drop.add_argument("keys", nargs="+", metavar="KEY")
    drop.set_defaults(func=cmd_unset)
    show = actions.add_parser(
        "list", help="every custom attribute, with where it comes from",
        description=WHAT + " The environment shown is this command's; the daemon's may differ.")
    add_home(show)
    add_json(show)
    show.set_defaults(func=cmd_list)


def _pairs(texts: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments, each checked as the daemon checks the file (CommandError names the first
    that is not usable)."""
    out: dict[str, str] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep:
            raise CommandError(f"{text!r}: not KEY=VALUE")
        problem = pair_problem(key, value)
        if problem is not None:
            raise CommandError(f"{key!r}: {problem}")
        out[key] = value
    return out


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, str]]:
    """The file's pairs, to be edited in place; written back atomically when the block ends without error."""
    private_dir(path.parent)
    fd = os.open(path.parent / ".attributes.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            pairs = read_file(path)
        except ValueError as exc:
            raise CommandError(f"{path}: {exc}; fix or remove it first") from None
        before = dict(pairs)
        yield pairs
        if len(pairs) > MAX_ATTRIBUTES:
            raise CommandError(f"more than {MAX_ATTRIBUTES} attributes in {path}")
        if pairs != before:
            atomic_write(path, orjson.dumps(pairs, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    finally:
        os.close(fd)


def cmd_set(args: argparse.Namespace) -> int:
    new = _pairs(args.pairs)
    path = attribute_file(paths_from(args).config_dir)
    with _locked(path) as pairs:
        pairs.update(new)
    print(f"set {', '.join(sorted(new))} in {path}")
    return 0


def cmd_unset(args: argparse.Namespace) -> int:
    path = attribute_file(paths_from(args).config_dir)
    with _locked(path) as pairs:
        gone = [k for k in args.keys if pairs.pop(k, None) is not None]
    missing = [k for k in args.keys if k not in gone]
    print(f"unset {', '.join(gone) or 'nothing'} in {path}" + (f" (not set: {', '.join(missing)})" if missing else ""))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    config = checked_config(paths)
    path = attribute_file(paths.config_dir)
    problems: dict[str, int] = {}
    layers: list[tuple[str, dict[str, str]]] = [("config [attributes]", checked(config.attributes, "[attributes]",
                                                                                problems))]
    for name in ENV_VARIABLES:
        layers.append((name, from_environment({name: os.environ.get(name, "")}, problems)))
    try:
        layers.append((str(path), checked(read_file(path), str(path), problems)))
    except ValueError as exc:
        problems[f"{path}: {exc}"] = 1
    effective: dict[str, tuple[str, str]] = {}
    for source, pairs in layers:
        for key, value in pairs.items():
            effective[key] = (value, source)
    if args.json:
        print_json({"attributes": {k: v for k, (v, _) in effective.items()},
                    "sources": {k: s for k, (_, s) in effective.items()}, "left_out": sorted(problems)})
        return 0
    if effective:
        print_table(("KEY", "VALUE", "FROM"), [(k, v, s) for k, (v, s) in sorted(effective.items())])
    else:
        print("no custom attributes")
    for reason in sorted(problems):
        print(f"left out: {reason}")
    return 0
