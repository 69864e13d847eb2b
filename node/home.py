"""Wiring: a node's home directory, and the real shells behind its core (RocksDB, hnswlib, files, keychain).

::

    HOME/
      config.toml     the settings: embedder, limits, p2p, … (no secrets; format 1 homes had config.json)
      keychain.json   the sealed keychain (0600)
      db/             RocksDB: the source of truth
      index/          sealed per-partition vector index snapshots (rebuildable from db/)
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import difflib
import hmac
import json
import logging
import os
import shutil
import tempfile
import tomllib
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import tomli_w

from gaml.node.core.consensus import Weights
from gaml.node.core.embed import Embedder, HashEmbedder
from gaml.node.core.errors import Unauthenticated
from gaml.node.core.memory.curate import Curator, ExtractiveCurator
from gaml.node.core.memory.ingest import Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.memory.tiers import TierPolicy
from gaml.node.core.node import Node
from gaml.node.core.service import Limit, Limits
from gaml.node.core.store.lexical import ANALYZER
from gaml.node.core.store.store import DEFAULT_MAX_PAYLOAD_BYTES, Store
from gaml.node.core.store.vectors import AdaptiveFactory
from gaml.node.core.text.privacy import Rules
from gaml.node.core.tokens import HeuristicCounter, TokenCounter
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.node.shells.files import FileBlobs, check_no_symlink, check_private_dir, write_atomic
from gaml.node.shells.hnsw_index import HnswFactory, Inserter
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto
from gaml.policy.access import PrincipalKind
from gaml.policy.errors import GamlError, InvalidInput, KeychainError, UnsafeFile
from gaml.policy.keychain import NODE_IDENTITY_REF, NODE_MASTER_REF
from gaml.policy.model import load_json

# The home's on-disk format. 1: settings in config.json ("format": "gaml-home-1"). 2: settings in config.toml
# (format = "gaml-home-2"). A home of an older format is upgraded when it is first opened (:func:`upgrade_home`);
# one of a newer format is refused, naming the GAML that reads it.
HOME_FORMAT: Final = 2
CONFIG_FORMAT: Final = f"gaml-home-{HOME_FORMAT}"
CONFIG_NAME: Final = "config.toml"
LEGACY_CONFIG: Final = "config.json"  # format 1
EMBEDDERS = ("minilm", "hash")

log = logging.getLogger("gaml.daemon")


def default_home() -> Path:
    return Path(os.environ.get("GAML_HOME") or Path.home() / ".gaml")


def make_embedder(name: str) -> Embedder:
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        from gaml.node.shells.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise GamlError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")


def make_counter(name: str) -> TokenCounter:
    """The token counter ``name``: ``heuristic`` (the built-in estimate of cl100k), ``cl100k_base`` or ``o200k_base``
    (real BPE tables, from the dev extra's bpe-openai)."""
    if name == "heuristic":
        return HeuristicCounter()
    if name in ("cl100k_base", "o200k_base"):
        try:
            from gaml.node.shells.bpe import BpeCounter
        except ImportError:  # the dev extra is not installed
            raise InvalidInput(f"the {name} counter needs `pip install bpe-openai`; use heuristic") from None
        return BpeCounter(name)
    raise InvalidInput(f"unknown token counter {name!r}: heuristic, cl100k_base or o200k_base")


CONFIG_ENV_PREFIX: Final = "GAML_CONFIG__"


def config_path(home: Path) -> Path:
    return home / CONFIG_NAME


def is_home(home: Path) -> bool:
    """Whether ``home`` holds a GAML home's settings (of any format)."""
    return config_path(home).exists() or (home / LEGACY_CONFIG).exists()


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            cfg = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{path} is not valid TOML: {e}") from None
    except RecursionError:
        raise InvalidInput(f"{path} is nested too deep to be a GAML configuration") from None
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{path} is unreadable: {e}") from None
    return cfg


def _format_of(cfg: Mapping[str, Any], path: Path) -> int:
    fmt = cfg.get("format")
    prefix = "gaml-home-"
    if not isinstance(fmt, str) or not fmt.startswith(prefix) or not fmt[len(prefix) :].isdigit():
        raise GamlError(f"{path}: unknown format {fmt!r}")
    n = int(fmt[len(prefix) :])
    if n > HOME_FORMAT:
        raise GamlError(
            f"{path}: this home is format {n}, made by a newer GAML; this one ({HOME_FORMAT}) cannot read it: "
            "upgrade GAML (pip install -U gaml-memory-node), or restore a backup made before the upgrade"
        )
    return n


def upgrade_home(home: Path) -> str | None:
    """Bring a home of an older format to :data:`HOME_FORMAT`; the note of what was done, or None if nothing was.

    Format 1 → 2: ``config.json`` becomes ``config.toml`` with the same settings (validated first), and the old file
    is kept as ``config.json.format-1`` (the backup: a GAML of format 1 reads the home again once it is renamed
    back). Idempotent, and safe when two processes open the home at once: both write the same file."""
    legacy = home / LEGACY_CONFIG
    if config_path(home).exists() or not legacy.exists():
        return None
    try:
        cfg = load_json(legacy.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{legacy} is unreadable: {e}") from None
    if not isinstance(cfg, dict):
        raise InvalidInput(f"{legacy} is not a JSON object")
    if _format_of(cfg, legacy) != 1:
        raise GamlError(f"{legacy}: a config.json holds format 1 only, not {cfg.get('format')!r}")
    cfg["format"] = CONFIG_FORMAT
    check_config(cfg, str(legacy))  # an invalid file is refused as it was, and nothing is changed
    kept = home / (LEGACY_CONFIG + ".format-1")
    if not kept.exists():
        shutil.copy2(legacy, kept)
    write_atomic(config_path(home), _toml(cfg), mode=0o600)
    with contextlib.suppress(FileNotFoundError):
        legacy.unlink()
    note = (
        f"upgraded the home {home} from format 1 to {HOME_FORMAT}: its settings are in {CONFIG_NAME} now "
        f"(config.json kept as {kept.name})"
    )
    return note


def _toml(cfg: Mapping[str, Any]) -> bytes:
    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items() if x is not None}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    body = tomli_w.dumps(clean(cfg))
    return (
        "# GAML home settings (docs/configuration.md). `gaml config set KEY VALUE` changes one, validated.\n" + body
    ).encode()


def read_config(home: Path, *, overrides: bool = True) -> dict[str, Any]:
    """``config.toml`` with the environment's overrides (:func:`config_overrides`; not with ``overrides=False``, for
    what is written back), validated (:func:`check_config`): a missing, wrongly typed or out-of-range setting is
    refused naming its key, when the home is opened rather than at the first call that needs it. A home of an older
    format is upgraded first (:func:`upgrade_home`)."""
    path = config_path(home)
    if not path.exists():
        if not (home / LEGACY_CONFIG).exists():
            raise GamlError(f"{home} is not a GAML home; run `gaml --home {home} init` first")
        note = upgrade_home(home)
        if note:
            log.warning("home_upgraded", extra={"fields": {"note": note, "home": str(home), "format": HOME_FORMAT}})
    try:
        cfg = _load_toml(path)
    except FileNotFoundError:
        raise GamlError(f"{home} is not a GAML home; run `gaml --home {home} init` first") from None
    if _format_of(cfg, path) != HOME_FORMAT:
        raise GamlError(f"{path}: format {cfg.get('format')!r} in a {CONFIG_NAME}; expected {CONFIG_FORMAT!r}")
    check_config(cfg, str(path))
    if overrides:
        changes = config_overrides()
        if changes:
            for key, value, _ in changes:
                cfg = set_setting(cfg, key, value)
            check_config(cfg, f"{path} with " + ", ".join(v for _, _, v in changes))
    return cfg


def config_overrides(env: Mapping[str, str] | None = None) -> list[tuple[tuple[str, ...], Any, str]]:
    """The settings the environment overrides, for containers: ``GAML_CONFIG__<KEY>`` with ``__`` between the parts
    of a nested key (``GAML_CONFIG__P2P__MDNS=true``, ``GAML_CONFIG__MAX_PAYLOAD_BYTES=2097152``); the value is read
    as JSON if it parses (numbers, ``true``, lists), else as a string. Each as (key path, value, variable)."""
    env = os.environ if env is None else env
    out = []
    for var in sorted(env):
        if not var.startswith(CONFIG_ENV_PREFIX):
            continue
        parts = tuple(p.lower() for p in var[len(CONFIG_ENV_PREFIX) :].split("__"))
        if not all(parts):
            raise InvalidInput(f"${var}: a setting's name is GAML_CONFIG__<KEY>[__<KEY>…]")
        text = env[var]
        try:
            value = load_json(text)
        except ValueError:
            value = text
        out.append((parts, value, var))
    return out


def set_setting(cfg: Mapping[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``cfg`` with the setting at ``path`` (``("p2p", "mdns")``) set to ``value`` (``None``: removed)."""
    out = json.loads(json.dumps(cfg))
    node = out
    for part in path[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise InvalidInput(f"{'.'.join(path)}: {part!r} is not a section")
        node = nxt
    if value is None:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return dict(out)


def write_config(home: Path, cfg: dict[str, Any]) -> None:
    """Validate ``cfg`` and write it as the home's ``config.toml`` (atomically, mode 0600)."""
    path = config_path(home)
    check_config(cfg, str(path))
    write_atomic(path, _toml(cfg), mode=0o600)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# The settings of config.toml, each as (type, default, meaning): check_config refuses any key not listed here (a typo
# is an error, not a silent default), and docs/configuration.md is generated from these tables and the dataclasses of
# the nested sections (`python -m gaml.node.home > docs/configuration.md`; a test keeps it current).
CONFIG_KEYS: Final[Mapping[str, tuple[str, str, str]]] = {
    "format": (f"`{CONFIG_FORMAT}`", "written by `gaml init`", "the version of this file's layout"),
    "embedder": ("`minilm` or `hash`", "`minilm`", "the embedding model (`gaml init --embedder`); fixed for the home"),
    "max_payload_bytes": ("positive integer", "1048576", "the largest sealed payload of one asset, in bytes"),
    "local_principal": (
        "principal id",
        "your login name at `gaml init`",
        "the node's own user: who every command acts as unless `--as` names another, and who callers on the "
        "daemon's socket are",
    ),
    "privacy_rules": ("path", "the built-in rules", "a JSON file of privacy rules replacing the built-in ones"),
    "limits": ("object", "see below", "per-principal rate and size limits of the daemon"),
    "tiers": ("object", "see below", "heat, tiers and retention of the journal"),
    "curator": ("object", '`{"kind": "extractive"}`', "how the ladder's summaries are written"),
    "p2p": ("object", "see below", "replication over libp2p"),
    "consensus": ("object", "see below", "reputation-weighted consensus between members of a boundary"),
}
P2P_KEYS: Final[Mapping[str, tuple[str, str, str]]] = {
    "listen": ("list of multiaddrs", "`/ip4/127.0.0.1/tcp/0` once in a boundary", "where the daemon listens"),
    "peers": ("list of multiaddrs", "none", "peers to dial and keep dialling (`…/p2p/<peer id>`)"),
    "mdns": ("boolean", "false", "announce the node on the LAN and dial the GAML nodes found there"),
    "gossip": ("boolean", "true", "in the public swarm, gossip this node's objects (gossipsub) beside sync"),
    "rendezvous": ("boolean", "true", "in the public swarm, find swarm nodes through the swarm's peers"),
}
CURATOR_KEYS: Final[Mapping[str, tuple[str, str, str]]] = {
    "kind": ("`extractive` or `openai`", "`extractive`", "extractive (offline) or a local OpenAI-compatible server"),
    "base_url": (
        "URL",
        "none",
        "with `openai`: the server on this machine, with or without `/v1` (`http://127.0.0.1:11434/v1`)",
    ),
    "model": ("string", "none", "with `openai`: the model name the server knows"),
    "api_key_env": ("environment variable", "none", "with `openai`: the variable holding its API key, if any"),
}


def _unknown(cfg: Mapping[str, Any], known: Iterable[str], where: str, prefix: str = "") -> None:
    """InvalidInput naming the first key of ``cfg`` not in ``known``, with the nearest known name if one is close (a
    typo), else the known names."""
    names = list(known)
    unknown = sorted(set(cfg) - set(names))
    if unknown:
        key = unknown[0]
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f"did you mean {prefix + near[0]!r}?" if near else f"known: {', '.join(prefix + k for k in names)}"
        raise InvalidInput(f"{where}: unknown setting {(prefix + key)!r} ({hint}; docs/configuration.md)")


def _section_keys() -> dict[str, list[str]]:
    """The keys each section (TOML table) of config.toml takes (their tables or dataclasses)."""
    return {
        "p2p": list(P2P_KEYS),
        "curator": list(CURATOR_KEYS),
        "limits": [f.name for f in dataclasses.fields(Limit)] + ["principals"],
        "tiers": [f.name for f in dataclasses.fields(TierPolicy)],
        "consensus": [f.name for f in dataclasses.fields(Weights)],
    }


def config_reference() -> str:
    """docs/configuration.md: every key of config.toml, from the tables that :func:`check_config` enforces."""

    def table(rows: Mapping[str, tuple[str, str, str]], prefix: str = "") -> list[str]:
        out = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        out += [f"| `{prefix}{k}` | {t} | {d} | {m} |" for k, (t, d, m) in rows.items()]
        return out

    def fields(cls: Any, prefix: str) -> list[str]:
        out = ["| key | default |", "| --- | --- |"]
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
            if isinstance(default, Mapping):
                default = ", ".join(f"{k}: {v}" for k, v in default.items())
            out.append(f"| `{prefix}{f.name}` | {default} |")
        return out

    lines = [
        "# Configuration: `config.toml`",
        "",
        "<!-- generated by `python -m gaml.node.home > docs/configuration.md` from node/home.py; do not edit -->",
        "",
        "Each home has a `config.toml` (mode 0600), written by `gaml init` and read at every start. A key GAML does",
        "not know is refused with an error naming it and the nearest valid name (`unknown setting 'p2p.mdsn' (did",
        "you mean 'p2p.mdns'?)`), as is a value of the wrong type or out of range; nothing is silently ignored.",
        "Secrets never go here: they are in the keychain, or named by an environment variable.",
        "",
        "```toml",
        'format = "gaml-home-2"',
        'embedder = "minilm"',
        "max_payload_bytes = 1048576",
        'local_principal = "alice"',
        "",
        "[p2p]",
        "mdns = true",
        'listen = ["/ip4/0.0.0.0/tcp/4001"]',
        "",
        "[limits.principals.bob]",
        "burst = 20",
        "```",
        "",
        "- `gaml config show` prints the settings in force (`--file`: the file alone); `gaml config check` validates",
        "  them (exit 2 naming the key at fault); `gaml config set KEY VALUE` changes one (a dotted key such as",
        "  `p2p.mdns` or `limits.principals.bob.burst`; the value is read as JSON if it parses, else as a string;",
        "  `--unset` removes it), validated before anything is written.",
        "- **Environment overrides** (containers): `GAML_CONFIG__<KEY>`, with `__` between the parts of a nested key",
        "  (`GAML_CONFIG__P2P__MDNS=true`, `GAML_CONFIG__P2P__LISTEN='[\"/ip4/0.0.0.0/tcp/4001\"]'`), override the",
        "  file for that process, are validated like it, and are never written back to it.",
        "- **Older homes**: a home of format 1 (settings in `config.json`) is upgraded when it is first opened: the",
        "  same settings are written to `config.toml` and the old file is kept as `config.json.format-1`. A home",
        "  of a newer format than this GAML reads is refused with what to do (docs/operations.md, *Upgrades*).",
        "",
        "## Top level",
        "",
        *table(CONFIG_KEYS),
        "",
        "## `p2p`",
        "",
        *table(P2P_KEYS, "p2p."),
        "",
        "## `curator`",
        "",
        *table(CURATOR_KEYS, "curator."),
        "",
        "## `limits`",
        "",
        "The defaults for every principal, and `limits.principals.<id>` with any of the same keys for one principal.",
        "",
        *fields(Limit, "limits."),
        "",
        "## `tiers`",
        "",
        *fields(TierPolicy, "tiers."),
        "",
        "## `consensus`",
        "",
        "Weights are in millionths (1,000,000 = 1.0); `trust` may name only some trust classes.",
        "",
        *fields(Weights, "consensus."),
        "",
    ]
    return "\n".join(lines)


def check_config(cfg: dict[str, Any], where: str) -> None:
    """Raise :class:`InvalidInput` naming the key of the first setting of ``cfg`` that is missing or wrong.

    Required: ``embedder`` (one of :data:`EMBEDDERS`), ``max_payload_bytes`` (a positive whole number). Optional:
    ``local_principal`` and ``privacy_rules`` (non-empty strings), ``limits`` (:class:`node.service.Limits`),
    ``tiers`` (``TierPolicy``), ``curator`` (an object with a ``kind``), ``p2p`` (``listen`` and
    ``peers``, lists of strings), ``consensus`` (:class:`node.core.consensus.Weights`, by field name). A key not in
    :data:`CONFIG_KEYS` (or, in ``p2p`` and ``curator``, their tables) is refused."""

    def bad(key: str, why: str) -> InvalidInput:
        return InvalidInput(f"{where}: {key!r} {why}")

    _unknown(cfg, CONFIG_KEYS, where)
    for key in ("embedder", "max_payload_bytes"):
        if key not in cfg:
            raise bad(key, "is missing (gaml init writes it)")
    if cfg["embedder"] not in EMBEDDERS:
        raise bad("embedder", f"is {cfg['embedder']!r}; choose one of {', '.join(EMBEDDERS)}")
    if not _positive_int(cfg["max_payload_bytes"]):
        raise bad("max_payload_bytes", f"is {cfg['max_payload_bytes']!r}; it is a positive whole number of bytes")
    for key in ("local_principal", "privacy_rules"):
        if key in cfg and cfg[key] is not None and not (isinstance(cfg[key], str) and cfg[key]):
            raise bad(key, f"is {cfg[key]!r}; it is a non-empty string")
    for key in ("limits", "tiers", "curator", "p2p", "consensus"):
        if key in cfg and cfg[key] is not None and not isinstance(cfg[key], dict):
            raise bad(key, f"is {type(cfg[key]).__name__}; it is an object")
    for key, names in _section_keys().items():
        _unknown(cfg.get(key) or {}, names, where, f"{key}.")
    for pid, lim in ((cfg.get("limits") or {}).get("principals") or {}).items():
        if isinstance(lim, dict):
            _unknown(lim, _section_keys()["limits"][:-1], where, f"limits.principals.{pid}.")
    try:
        Limits.from_json(cfg.get("limits") or {})
    except InvalidInput as e:
        raise bad("limits", f": {e}") from None
    try:
        TierPolicy.from_json(cfg.get("tiers") or {})
    except InvalidInput as e:
        raise bad("tiers", f": {e}") from None
    try:
        Weights.from_json(cfg.get("consensus") or {})
    except (ValueError, TypeError) as e:
        raise bad("consensus", f": {e}") from None
    curator = cfg.get("curator") or {"kind": "extractive"}
    if not isinstance(curator.get("kind"), str):
        raise bad("curator", "needs a 'kind' (extractive or openai)")
    for key in ("listen", "peers"):
        value = (cfg.get("p2p") or {}).get(key, [])
        if not _strings(value):
            raise bad(f"p2p.{key}", f"is {value!r}; it is a list of multiaddr strings")


def consensus_weights(home: Path) -> Weights:
    """The consensus policy's numbers: ``config.toml``'s ``consensus`` section over the documented defaults."""
    return Weights.from_json(read_config(home).get("consensus") or {})


def check_home(home: Path) -> None:
    """Raise :class:`UnsafeFile`, saying what to do, unless ``home`` is a directory of this user that others cannot
    enter (it may itself be a symlink: its target is checked) whose own files and directories are no symlinks, and
    whose ``run/`` and ``tls/`` are private directories too."""
    try:
        st = os.stat(home)
    except FileNotFoundError:
        return  # read_config says it is not a home
    uid = os.getuid()
    if st.st_uid != uid:
        raise UnsafeFile(f"the home {home} belongs to uid {st.st_uid}, not to you (uid {uid}): chown -R {uid} {home}")
    if st.st_mode & 0o077:
        raise UnsafeFile(f"the home {home} is open to others (mode {st.st_mode & 0o7777:04o}): chmod 700 {home}")
    for name in (CONFIG_NAME, LEGACY_CONFIG, "keychain.json", "db", "index"):
        check_no_symlink(home / name, f"the home's {name}")
    for name in ("run", "tls"):
        if os.path.lexists(home / name):
            check_private_dir(home / name, f"the home's {name}/")


def local_principal(home: Path, node: Node) -> str | None:
    """Who this node's own user is: ``config.toml`` ``local_principal``, else its only user principal, else None."""
    name = read_config(home).get("local_principal")
    if name:
        return str(name)
    users = [p.id for p in node.governance.principals() if p.kind is PrincipalKind.USER]
    return users[0] if len(users) == 1 else None


def init_home(
    home: Path,
    unlock: Unlock,
    *,
    embedder: str = "minilm",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    user: str = "",
) -> str:
    """Create a node: identity and master secret in a new keychain, an empty store. Returns the node id.

    ``user``: the node's own user (config ``local_principal``): who every command acts as unless told otherwise, and
    who callers on the daemon's socket are. Registered as a user principal by the first call that needs it.

    The home is built in a temporary sibling directory and renamed into place, so an interrupted init leaves no
    half-made home behind (only a ``.HOME.init-*`` directory, which a later init ignores).
    """
    if embedder not in EMBEDDERS:
        raise GamlError(f"unknown embedder {embedder!r}; choose one of {', '.join(EMBEDDERS)}")
    if max_payload_bytes <= 0:
        raise GamlError("the payload limit must be a positive number of bytes")
    if user:
        crypto.check_principal_id(user)
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise GamlError(f"{home} already exists and is not empty; refusing to overwrite it")
    home.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{home.name}.init-", dir=home.parent))
    try:
        entropy = crypto.SystemEntropy()
        kc = FileKeychain.create(work / "keychain.json", unlock, entropy)
        kc.put(NODE_IDENTITY_REF, entropy.random_bytes(32))
        kc.put(NODE_MASTER_REF, entropy.random_bytes(32))
        cfg: dict[str, Any] = {"format": CONFIG_FORMAT, "embedder": embedder, "max_payload_bytes": max_payload_bytes}
        if user:
            cfg["local_principal"] = user
        write_atomic(config_path(work), _toml(cfg), mode=0o600)
        identity = crypto.SigningKey(kc.get(NODE_IDENTITY_REF))
        kv = RocksKV(work / "db")
        Store.open(kv, FileBlobs(work / "index"), kc, identity, _index_factory(), entropy).close()
        os.rename(work, home)  # atomic; replaces an empty directory, refuses a non-empty one
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return identity.public_key.hex()


def _index_factory(inserter: Inserter | None = None) -> AdaptiveFactory:
    return AdaptiveFactory(HnswFactory(inserter=inserter))


def open_node(
    home: Path, unlock: Unlock | None, *, embedder: Embedder | None = None, inserter: Inserter | None = None
) -> Node:
    """Open the node in ``home`` with its real shells. Raises typed errors for a locked, corrupt or foreign store.
    ``inserter``: HNSW inserts go to its thread while the caller goes on (``node.shells.hnsw_index``; the daemon's)."""
    check_home(home)
    cfg = read_config(home)
    if unlock is None:
        raise KeychainError("the keychain is locked: set GAML_PASSPHRASE (or GAML_KEYCHAIN_KEY for unattended nodes)")
    entropy = crypto.SystemEntropy()
    path = home / "keychain.json"
    stamp = _stamp(path)
    kc = FileKeychain.open(path, unlock, entropy)  # a wrong passphrase stops here, before the database is touched
    kv = RocksKV(home / "db", create=False)
    try:
        if _stamp(path) != stamp:
            # Another process added a key (a new partition's) between our read and the database's lock, which it
            # held: read the keychain again, now that nobody else can change it.
            kc = FileKeychain.open(path, unlock, entropy)
        certs.seal_clear_lists(home, kc)  # a home from before names were sealed: no name stays in the clear
        identity = crypto.SigningKey(kc.get(NODE_IDENTITY_REF))
        emb = embedder or make_embedder(cfg["embedder"])
        store = Store.open(
            kv,
            FileBlobs(home / "index"),
            kc,
            identity,
            _index_factory(inserter),
            entropy,
            max_payload_bytes=cfg["max_payload_bytes"],
        )
    except BaseException:
        kv.close()
        raise
    if store.reanalyzed_assets:
        n = store.reanalyzed_assets
        note = f"the word index of {home} was made again for this GAML's analyzer ({ANALYZER}): {n} assets"
        log.warning(
            "lexical_reanalysed",
            extra={"fields": {"note": note, "home": str(home), "assets": n, "analyzer": ANALYZER}},
        )
    return Node(store, emb)


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def memory_layers(home: Path, node: Node) -> tuple[Ingestor, Ladder]:
    """The ingestion pipeline and the ladder's upkeep of ``node``, configured from ``home/config.toml``:

    - ``privacy_rules``: a rules file (relative to the home) replacing the shipped rules
      (``node/core/text/privacy_rules.json``);
    - ``tiers``: ``TierPolicy`` settings (half-life, thresholds, per-level forget-after and retention);
    - ``curator``: ``{"kind": "extractive"}`` (the default, offline) or ``{"kind": "openai", "base_url": …,
      "model": …, "api_key_env": …}`` for a local OpenAI-compatible server (llama.cpp, vLLM, Ollama).
    """
    cfg = read_config(home)
    rules_file = cfg.get("privacy_rules")
    if rules_file:
        path = home / str(rules_file)
        try:
            rules = Rules.load(path.read_bytes())
        except OSError as e:
            raise GamlError(f"privacy rules {path}: {e.strerror or e}") from e
    else:
        rules = Rules.load_default()
    policy = TierPolicy.from_json(cfg.get("tiers", {}))
    cur = cfg.get("curator") or {"kind": "extractive"}
    curator: Curator
    if cur.get("kind") == "extractive":
        curator = ExtractiveCurator()
    elif cur.get("kind") == "openai":
        from gaml.node.shells.llm_curator import OpenAICompatibleCurator

        try:
            base_url, model = str(cur["base_url"]), str(cur["model"])
        except KeyError as e:
            raise GamlError(f"{config_path(home)}: the openai curator needs {e.args[0]!r}") from None
        # Curation reads every item, local-only ones included: the model must run on this machine.
        host = urllib.parse.urlsplit(base_url).hostname or ""
        if host not in ("localhost", "127.0.0.1", "::1"):
            raise GamlError(
                f"{config_path(home)}: the curator's server {host or base_url!r} is not on this machine; curation "
                "reads local-only memory, so only a loopback address (127.0.0.1, ::1, localhost) is accepted"
            )
        curator = OpenAICompatibleCurator(base_url, model, api_key_env=cur.get("api_key_env"))
    else:
        raise GamlError(f"{config_path(home)}: unknown curator kind {cur.get('kind')!r} (extractive or openai)")
    ingestor = Ingestor(node, rules)
    return ingestor, Ladder(node, ingestor, curator, policy)


# -- access tokens: how a principal authenticates to the node's HTTP doors (MCP over HTTP, the OpenAI-compatible proxy)
# and, as gRPC metadata, to its daemon's socket. A token names its principal and carries a MAC under a key derived from
# the node's master secret: it is checked without any state, and it is valid on this node only.

ACCESS_TOKEN_PREFIX = "gaml1_"
_ACCESS_TOKEN_TAG = b"gaml-access-token-1"
_ACCESS_TOKEN_MAC_BYTES = 32


def _token_mac(keychain: Any, principal: str) -> bytes:
    key = crypto.derive_key(keychain.get(NODE_MASTER_REF), _ACCESS_TOKEN_TAG)
    return crypto.keyed_hash(key, principal.encode(), _ACCESS_TOKEN_MAC_BYTES)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value (an HTTP header or gRPC metadata); None when the value
    is not of that form."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def access_token(keychain: Any, principal: str) -> str:
    """The bearer token of ``principal`` on this node (the same each time it is asked for: print it only to its
    holder, e.g. `gaml token`)."""
    crypto.check_principal_id(principal)
    return f"{ACCESS_TOKEN_PREFIX}{_b64(principal.encode())}.{_b64(_token_mac(keychain, principal))}"


def token_principal(keychain: Any, token: str) -> str:
    """The principal a bearer token names; :class:`Unauthenticated` unless it is one this node issued."""
    if not isinstance(token, str) or not token.startswith(ACCESS_TOKEN_PREFIX) or len(token) > 512:
        raise Unauthenticated("not a GAML access token (they begin gaml1_; `gaml token` prints yours)")
    body = token[len(ACCESS_TOKEN_PREFIX) :]
    try:
        name_part, mac_part = body.split(".")
        principal = _unb64(name_part).decode()
        mac = _unb64(mac_part)
    except (ValueError, UnicodeDecodeError):
        raise Unauthenticated("a malformed GAML access token") from None
    try:
        crypto.check_principal_id(principal)
    except InvalidInput:
        raise Unauthenticated("a malformed GAML access token") from None
    if not hmac.compare_digest(mac, _token_mac(keychain, principal)):
        raise Unauthenticated("this access token was not issued by this node")
    return principal


if __name__ == "__main__":
    print(config_reference(), end="")
