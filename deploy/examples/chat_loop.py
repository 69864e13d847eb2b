"""A chat loop with memory: a local model (llama.cpp's server, Ollama, vLLM: any OpenAI-compatible endpoint) and the
GAML daemon of $GAML_HOME, through the Python SDK.

Each turn: hydrate a frame for what the user said, give it to the model as system context, print the reply, and
remember the exchange. Run a daemon first (`gaml run`), then:

    python chat_loop.py                                   # Ollama's default endpoint, model llama3.2
    python chat_loop.py --base-url http://127.0.0.1:8080/v1 --model local
    python chat_loop.py --once "What do I drink in the morning?"   # one turn, then exit

(`gaml proxy --upstream URL` does the same for any OpenAI client without code.)
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request

from gaml.node import connect


def ask_model(base_url: str, model: str, messages: list[dict[str, str]]) -> str:
    url = base_url.rstrip("/") + (
        "/chat/completions" if base_url.rstrip("/").endswith("/v1") else "/v1/chat/completions"
    )
    body = json.dumps({"model": model, "messages": messages}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return str(json.load(r)["choices"][0]["message"]["content"])


def turn(memory, base_url: str, model: str, text: str, budget: int) -> str:  # type: ignore[no-untyped-def]
    frame = memory.hydrate(text, budget).frame  # what memory holds for this, inside its <gaml-memory> envelope
    reply = ask_model(base_url, model, [{"role": "system", "content": frame}, {"role": "user", "content": text}])
    memory.remember([{"role": "user", "content": text}, {"role": "assistant", "content": reply}], session="chat-loop")
    return reply


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"))
    p.add_argument("--model", default=os.environ.get("GAML_CHAT_MODEL", "llama3.2"))
    p.add_argument("--budget", type=int, default=800, help="tokens of memory per turn")
    p.add_argument("--once", metavar="TEXT", help="one turn, then exit")
    args = p.parse_args()
    with connect() as memory:
        if args.once:
            print(turn(memory, args.base_url, args.model, args.once, args.budget))
            return
        while True:
            try:
                text = input("you> ").strip()
            except (EOFError, KeyboardInterrupt):
                return
            if text:
                print("model>", turn(memory, args.base_url, args.model, text, args.budget))


if __name__ == "__main__":
    main()
