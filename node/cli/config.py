"""``gaml config show | check | set``: the home's configuration (``config.toml``) and the environment's overrides.

``show`` prints the settings in force (the file with ``GAML_CONFIG__…`` overrides applied; ``--file``: the file
alone); ``check`` validates them, exiting 2 with the key at fault (and the nearest valid name for a typo); ``set
KEY VALUE`` changes one setting (a dotted key, ``p2p.mdns``; the value read as JSON if it parses, else as a string;
``--unset`` removes it), validated before anything is written. Every key: docs/configuration.md.
"""

from __future__ import annotations

import argparse
import json

from gaml.node.home import config_overrides, config_path, read_config, set_setting, write_config
from gaml.policy.errors import InvalidInput
from gaml.policy.model import load_json


def cmd_config_show(args: argparse.Namespace) -> None:
    print(json.dumps(read_config(args.home, overrides=not args.file), indent=1))


def cmd_config_check(args: argparse.Namespace) -> None:
    read_config(args.home)  # raises InvalidInput (exit 2) naming the key
    overrides = [var for _, _, var in config_overrides()]
    print(json.dumps({"ok": True, "config": str(config_path(args.home)), "overrides": overrides}))


def cmd_config_set(args: argparse.Namespace) -> None:
    path = tuple(args.key.split("."))
    if not all(path):
        raise InvalidInput(f"{args.key!r} is not a setting's name (dotted: p2p.mdns, limits.burst)")
    if path == ("format",):
        raise InvalidInput("'format' is the file's layout, written by GAML; it is not set by hand")
    if args.unset == (args.value is not None):
        raise InvalidInput("give a VALUE, or --unset, not both")
    value = None
    if args.value is not None:
        try:
            value = load_json(args.value)
        except ValueError:
            value = args.value
    cfg = set_setting(read_config(args.home, overrides=False), path, value)
    write_config(args.home, cfg)  # validated first: a typo or a wrong value writes nothing
    print(json.dumps({"set": args.key, "value": value}))


def add_config_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("config", help="the home's configuration: show, check, set (docs/configuration.md)")
    csub = s.add_subparsers(dest="config_command", required=True, metavar="show|check|set")
    a = csub.add_parser("show", help="the settings in force (config.toml and GAML_CONFIG__… overrides)")
    a.add_argument("--file", action="store_true", help="the file alone, without the environment's overrides")
    a.set_defaults(func=cmd_config_show)
    a = csub.add_parser("check", help="validate the settings; exit 2 naming a key that is unknown or wrong")
    a.set_defaults(func=cmd_config_check)
    a = csub.add_parser("set", help="set one setting (validated before it is written)")
    a.add_argument("key", help="a dotted name: p2p.mdns, max_payload_bytes, limits.principals.bob.burst")
    a.add_argument("value", nargs="?", help='read as JSON if it parses (true, 42, ["a"]), else as a string')
    a.add_argument("--unset", action="store_true", help="remove the setting (its default applies)")
    a.set_defaults(func=cmd_config_set)


__all__ = ["add_config_parser"]
