"""A model-backed curator over an OpenAI-compatible chat-completions endpoint. A shell: it does network I/O.

:class:`OpenAICompatibleCurator` implements :class:`node.curate.Curator` by POSTing to
``{base_url}/v1/chat/completions`` (llama.cpp's server, vLLM, Ollama, LM Studio — on this machine: ``node.home``
refuses any other host, as curation reads local-only memory) with urllib, at temperature 0, asking for one
sentence of at most ``limit`` characters. The reply is validated (JSON shape, a non-blank string) and cut to
``limit`` at a word boundary. On any failure (connection refused, timeout, HTTP error, bad JSON, wrong shape, empty
answer) that one call falls back to :class:`node.curate.ExtractiveCurator`, and
``failures`` counts it; ``last_error`` names the failure's kind (never its text, which could quote a header).

Off by default: the orchestrator uses it only when configured. The API key, when one is needed, is read from the
environment variable named by ``api_key_env`` at each call; it is never stored, logged or shown by ``repr``. Proxies
from the environment apply, except to loopback hosts, where a local model server is reached directly.

Unlike the extractive curator, this one is not deterministic across model versions or servers, so rungs it wrote are
only reproducible from the same endpoint and model; ``name`` records both the kind and the model.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, Final

from gaml.node.core.memory.curate import SUMMARY_CHARS_MIN, ExtractiveCurator, bound, clip, flat
from gaml.node.shells.errors import CurationError

SYSTEM_PROMPT: Final = (
    "You summarize an excerpt of a conversation or agent session for a memory system. "
    "Reply with exactly one plain sentence of at most {limit} characters that states what was decided, "
    "learned or done, naming the people, files and tools involved. No preamble, no quotes, no lists."
)
TEXT_CHARS_MAX: Final = 1500  # of one text sent to the model (head and tail kept)
PROMPT_CHARS_MAX: Final = 12000  # of all texts together
RESPONSE_BYTES_MAX: Final = 1 << 20


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def chat_completions_url(base_url: str) -> str:
    """The chat-completions endpoint of an OpenAI-compatible server, from its base URL as people write it: with
    ``/v1`` (the OpenAI and Ollama convention: ``http://127.0.0.1:11434/v1``), without it (llama.cpp's
    ``http://127.0.0.1:8080``), or the endpoint itself."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


class OpenAICompatibleCurator:
    """One sentence from a chat-completions model; the extractive curator when the model fails."""

    def __init__(self, base_url: str, model: str, *, timeout: float = 30.0, api_key_env: str | None = None) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"curator base URL must be http(s)://host[:port][/path], got {base_url!r}")
        if timeout <= 0:
            raise ValueError(f"curator timeout must be positive, got {timeout}")
        self.url = chat_completions_url(base_url)
        self.model = model
        self.timeout = timeout
        self.api_key_env = api_key_env
        self.name = f"openai-compatible:{model}"
        self.failures = 0
        self.calls = 0
        self.last_error: str | None = None
        self._fallback = ExtractiveCurator()
        proxies: dict[str, str] | None = {} if _is_loopback(parsed.hostname) else None  # None: from the environment
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))

    def __repr__(self) -> str:
        return f"OpenAICompatibleCurator(url={self.url!r}, model={self.model!r}, failures={self.failures})"

    def summarize(self, texts: Sequence[str], *, goal: str, limit: int) -> str:
        if limit < SUMMARY_CHARS_MIN:
            raise ValueError(f"summary limit {limit} is below {SUMMARY_CHARS_MIN} characters")
        if not any(t.strip() for t in texts):
            raise ValueError("nothing to summarize: no non-blank text")
        self.calls += 1
        try:
            return self._ask(texts, goal=goal, limit=limit)
        except (OSError, http.client.HTTPException, ValueError, CurationError) as exc:
            # OSError covers URLError, HTTPError, refused connections and timeouts; ValueError covers bad JSON.
            self.failures += 1
            self.last_error = type(exc).__name__
            return self._fallback.summarize(texts, goal=goal, limit=limit)

    def _request_body(self, texts: Sequence[str], goal: str, limit: int) -> bytes:
        excerpt = bound("\n".join(bound(t, TEXT_CHARS_MAX) for t in texts if t.strip()), PROMPT_CHARS_MAX)
        user = f"Goal: {flat(goal) or '(none stated)'}\n\nExcerpt:\n{excerpt}"
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT.format(limit=limit)},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": max(16, limit // 2),
            "stream": False,
        }
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _ask(self, texts: Sequence[str], *, goal: str, limit: int) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            self.url, data=self._request_body(texts, goal, limit), headers=headers, method="POST"
        )
        with self._opener.open(request, timeout=self.timeout) as response:
            raw = response.read(RESPONSE_BYTES_MAX + 1)
        if len(raw) > RESPONSE_BYTES_MAX:
            raise CurationError("response too large")
        return self._parse(json.loads(raw), limit)

    @staticmethod
    def _parse(data: Any, limit: int) -> str:
        if not isinstance(data, dict):
            raise CurationError("response is not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise CurationError("response has no choices")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise CurationError("response has no message content")
        text = flat(content).strip("\"'“”` ")
        if not text:
            raise CurationError("empty answer")
        return clip(text, limit)


__all__ = ["SYSTEM_PROMPT", "OpenAICompatibleCurator"]
