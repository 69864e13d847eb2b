"""The examples the README points to (deploy/examples/) run as written: the chat loop against a fake OpenAI-compatible
model and a running daemon, the MCP configuration's command under the SDK's own client, and the transcript watcher."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.node.daemon_util import KEY_HEX, ROOT, gaml_process, make_home, process_daemon, remove_home
from tests.node.test_agent_doors import Upstream

EXAMPLES = ROOT / "deploy" / "examples"


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "GAML_HOME": str(home), "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    env.pop("GAML_AS", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `gaml` as installed
    return env


def test_the_chat_loop_hydrates_asks_and_remembers() -> None:
    home = make_home(tls=False)
    upstream = Upstream("You drink oolong in the morning.")
    try:
        with process_daemon(home):
            r = subprocess.run(
                [
                    *(sys.executable, str(EXAMPLES / "chat_loop.py"), "--base-url", upstream.url, "--model", "m"),
                    *("--once", "I always drink oolong tea in the morning."),
                ],
                capture_output=True,
                text=True,
                env=_env(home.path),
                timeout=120,
                check=False,
            )
            assert r.returncode == 0, r.stderr
            assert r.stdout.strip() == "You drink oolong in the morning."
            sent = upstream.requests[-1]["messages"]
            assert sent[0]["role"] == "system" and sent[0]["content"].startswith("<gaml-memory receipt=")
            hits = gaml_process(home.path, "search", "oolong", "--json")
            assert hits.returncode == 0, hits.stderr
            assert any("oolong" in h["text"] for h in json.loads(hits.stdout))
    finally:
        upstream.close()
        remove_home(home)


def test_the_mcp_configuration_starts_a_server_the_sdk_can_use() -> None:
    config = json.loads((EXAMPLES / "mcp.json").read_text())["mcpServers"]["gaml"]
    home = make_home(tls=False)
    try:
        env = {**_env(home.path), **config["env"], "GAML_HOME": str(home.path)}
        with process_daemon(home):  # as the README advises: a daemon, so the MCP server needs no passphrase
            env.pop("GAML_KEYCHAIN_KEY")
            params = StdioServerParameters(command=config["command"], args=config["args"], env=env)

            async def main() -> Any:
                async with Client(params) as c:
                    names = {t.name for t in (await c.list_tools()).tools}
                    kept = await c.call_tool("remember", {"text": "The build server is called Ferris"})
                    return names, kept.structured_content

            names, kept = anyio.run(main)
        assert {"remember", "recall", "hydrate", "forget"} <= names and kept["ids"]
    finally:
        remove_home(home)


@contextlib.contextmanager
def watcher(home: Path, folder: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**_env(home), "GAML_WATCH_INTERVAL": "0.2"}
    proc = subprocess.Popen(
        [str(EXAMPLES / "watch_transcripts.sh"), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(60)


def test_the_transcript_watcher_ingests_what_is_appended(tmp_path: Path) -> None:
    home = make_home(tls=False)
    folder = tmp_path / "projects"
    (folder / "repo").mkdir(parents=True)
    log = folder / "repo" / "session.jsonl"
    line = {"role": "user", "content": "Use the staging cluster for the load test", "timestamp": 1767225600}
    log.write_text(json.dumps(line) + "\n")
    try:
        with watcher(home.path, folder) as proc:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            assert first["sources"] == 1 and first["items"] == 1
            with log.open("a") as f:
                f.write(json.dumps({**line, "content": "The load test found a leak in the cache"}) + "\n")
            second = json.loads(proc.stdout.readline())
            assert second["items"] == 1 and second["skipped"] == 1  # only the new record
    finally:
        remove_home(home)
