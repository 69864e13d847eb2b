"""The model-backed curator: a canned OpenAI-style server, and the extractive fallback on every kind of failure."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gaml.node.core.memory.curate import ExtractiveCurator
from gaml.node.shells.llm_curator import OpenAICompatibleCurator

TEXTS = [
    "Hi! Can you set up the database?",
    "We decided to use Postgres 16 for the billing service.",
    "All tests pass now.",
]
GOAL = "set up the billing database"
ANSWER = "The team chose Postgres 16 for billing, and the tests pass."


def completion(content: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "tiny",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }


class FakeModel:
    """What the fake server answers, and what it was asked."""

    def __init__(self) -> None:
        self.status = 200
        self.body: bytes = json.dumps(completion(ANSWER)).encode()
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def answer(self, obj: Any, status: int = 200) -> None:
        self.status = status
        self.body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()


@pytest.fixture
def server() -> Iterator[tuple[str, FakeModel]]:
    """A chat-completions endpoint on 127.0.0.1, port chosen by the OS."""
    model = FakeModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            model.requests.append((self.path, dict(self.headers.items()), body))
            self.send_response(model.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(model.body)))
            self.end_headers()
            self.wfile.write(model.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", model
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_base_url_with_or_without_v1_reaches_the_same_endpoint(server: tuple[str, FakeModel]) -> None:
    """The OpenAI/Ollama convention (a base URL ending in /v1) and llama.cpp's (the bare server) both reach
    /v1/chat/completions; neither becomes /v1/v1/… (a 404 that fell back silently before)."""
    url, model = server
    for base in (url, url + "/v1", url + "/v1/", url + "/v1/chat/completions"):
        cur = OpenAICompatibleCurator(base, "tiny", timeout=5.0)
        assert cur.summarize(TEXTS, goal=GOAL, limit=200) == ANSWER and cur.failures == 0
    assert [r[0] for r in model.requests] == ["/v1/chat/completions"] * 4


def extractive() -> str:
    return ExtractiveCurator().summarize(TEXTS, goal=GOAL, limit=200)


def test_summarizes_through_the_endpoint(server: tuple[str, FakeModel], monkeypatch: pytest.MonkeyPatch) -> None:
    """A good answer is returned as is; the request is a temperature-0 chat completion with the goal and texts."""
    url, model = server
    monkeypatch.setenv("GAML_TEST_KEY", "sk-secret-123")
    cur = OpenAICompatibleCurator(url + "/", "tiny", timeout=5.0, api_key_env="GAML_TEST_KEY")
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == ANSWER
    assert (cur.failures, cur.calls) == (0, 1)
    path, headers, body = model.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-secret-123"
    assert body["model"] == "tiny"
    assert body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "200 characters" in body["messages"][0]["content"]
    assert GOAL in body["messages"][1]["content"]
    assert "Postgres 16" in body["messages"][1]["content"]
    assert "sk-secret" not in repr(cur)
    assert "sk-secret" not in json.dumps(vars(cur), default=str)
    assert cur.name == "openai-compatible:tiny"


def test_no_key_no_authorization_header(server: tuple[str, FakeModel]) -> None:
    """Without api_key_env no Authorization header is sent."""
    url, model = server
    cur = OpenAICompatibleCurator(url, "tiny", timeout=5.0)
    cur.summarize(TEXTS, goal=GOAL, limit=200)
    assert "Authorization" not in model.requests[0][1]


def test_long_answer_trimmed_to_limit(server: tuple[str, FakeModel]) -> None:
    """An answer longer than the limit is cut at a word boundary."""
    url, model = server
    model.answer(completion("  The team chose Postgres 16 " + "and wrote many more words " * 20))
    out = OpenAICompatibleCurator(url, "tiny", timeout=5.0).summarize(TEXTS, goal=GOAL, limit=60)
    assert len(out) <= 60
    assert out.startswith("The team chose Postgres 16")


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (b"<html>not json</html>", 200),
        ({"choices": []}, 200),
        ({"choices": [{"message": {"content": 42}}]}, 200),
        (completion("   "), 200),
        ([1, 2, 3], 200),
        ({"error": {"message": "overloaded"}}, 500),
        ({"error": "unauthorized"}, 401),
    ],
)
def test_bad_answers_fall_back(server: tuple[str, FakeModel], answer: Any, status: int) -> None:
    """Garbage, a wrong shape, an empty answer or an HTTP error falls back to the extractive curator and counts."""
    url, model = server
    model.answer(answer, status)
    cur = OpenAICompatibleCurator(url, "tiny", timeout=5.0)
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == extractive()
    assert cur.failures == 1
    assert cur.last_error is not None


def test_closed_port_falls_back() -> None:
    """A refused connection falls back to the extractive curator, once per call."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    cur = OpenAICompatibleCurator(f"http://127.0.0.1:{port}", "tiny", timeout=5.0)
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == extractive()
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == extractive()
    assert (cur.failures, cur.calls) == (2, 2)


def test_recovers_after_a_failure(server: tuple[str, FakeModel]) -> None:
    """A failure affects only its own call."""
    url, model = server
    cur = OpenAICompatibleCurator(url, "tiny", timeout=5.0)
    model.answer(b"garbage")
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == extractive()
    model.answer(completion(ANSWER))
    assert cur.summarize(TEXTS, goal=GOAL, limit=200) == ANSWER
    assert (cur.failures, cur.calls) == (1, 2)


def test_rejects_bad_configuration() -> None:
    """Only http(s) URLs with a host and a positive timeout are accepted."""
    for url in ("file:///etc/passwd", "ftp://host", "localhost:8080", "http://"):
        with pytest.raises(ValueError):
            OpenAICompatibleCurator(url, "tiny")
    with pytest.raises(ValueError):
        OpenAICompatibleCurator("http://127.0.0.1:1", "tiny", timeout=0)
