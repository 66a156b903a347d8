"""A small OpenAI-compatible chat server on 127.0.0.1 with a fixed latency and a per-key concurrency limit.

It stands in for a remote provider in benchmarks (``recagent-gym evaluate efficiency``) and tests: every
``POST .../chat/completions`` sleeps ``latency_s`` and answers

- a choice request (``response_format`` with a JSON schema whose ``choice`` is an enum, or a prompt ending in the
  options as ``- option`` lines, as :class:`~recagent_gym.llm.openai_backend.OpenAIBackend` sends them): the option
  named by ``PICK:<label>`` in the prompt, else the first option (``choice="first"``) or a seeded random one
  (``choice="random"``: drawn from the request's own ``seed`` when it sends one, which the client derives from the
  prompt, so a run gets the same answers whatever order its concurrent requests arrive in), as ``{"choice": ...}``
  under a schema and as plain text otherwise;
- any other request: the canned sentence ``reply``; with ``reply=None``, :func:`plausible_reply`: what a model that
  follows this project's prompt formats would send (a sentence of the observation for a memory summary,
  ``4 | ...`` for a feeling with its rating, ``4 | ... | 3`` when asked how memorable too, a whole dialogue for a
  one-call chat, insights naming a word of the memories, a short search query), so that a benchmark measures the
  requests of the prompts, not the re-asks a canned sentence provokes.

**Rate limit model.** A provider limits each API key's throughput, which is what lets the paper's extra keys speed
a round up. Here each key (the ``Authorization`` header) may have at most ``per_key_concurrency`` requests being
served at once; further requests with that key wait in line (they are not refused), so one key's throughput is
``per_key_concurrency / latency_s`` requests per second and ``k`` keys give ``k`` times that.

Counters (read them after the run): ``request_count``, ``key_counts`` (requests per key, in first-seen order of
the keys, as a list so no key text leaves the server), ``in_flight``/``max_in_flight`` (being served, queued ones
excluded) and ``max_waiting``. Subclasses (the fault-injecting test server) override :meth:`respond`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import numpy as np

PICK = re.compile(r"PICK:(\S+)")
OPTION_PREFIX = "- "


def trailing_options(prompt: str) -> list[str]:
    """The ``- option`` lines that end the prompt (where the backend lists them); earlier ``- `` lines (a page of
    items, memories) are not options."""
    lines = prompt.rstrip("\n").split("\n")
    options: list[str] = []
    while lines and lines[-1].startswith(OPTION_PREFIX):
        options.append(lines.pop()[len(OPTION_PREFIX) :])
    return options[::-1]


log = logging.getLogger(__name__)

DEFAULT_REPLY = "I watched Toy Story last week and enjoyed it a lot."
_CHAT = re.compile(r"exactly (\d+) short lines, alternating speakers")
_CHATTERS = re.compile(r"^It is .*?\. (.+?) and (.+?) chat about movies\.$", re.MULTILINE)
_ABOUT = re.compile(r"^(?:Recent )?[Mm]emories of (.+?):$", re.MULTILINE)
_CONTENT = re.compile(r"\b[a-z]{5,}\b")
_COUNT = re.compile(r"^(\d+) high-level insights", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def prompt_tokens(body: dict[str, Any]) -> int:
    """The request's prompt tokens, estimated as 4/3 per word of its messages (no tokenizer here)."""
    words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    return max(1, round(words * 4 / 3))


def plausible_reply(prompt: str) -> str:
    """A format-following answer to a free-text prompt of this project (see the module docstring)."""
    lines = prompt.rstrip().splitlines()
    if lines and lines[-1].endswith("Sentence:"):  # memory summary (with its importance when the prompt asks)
        observed = [ln[len("Observation: ") :] for ln in lines if ln.startswith("Observation: ")]
        sentence = _SENTENCE_END.split(observed[-1].strip(), maxsplit=1)[0] if observed else DEFAULT_REPLY
        if len(sentence) > 120:
            sentence = sentence[:120].rsplit(" ", 1)[0] + "."
        return sentence + (" | Importance: 3" if "| Importance:" in prompt else "")
    if '"|"' in prompt and "to 5 (loved it)" in prompt:  # feeling with its rating (and how memorable, if asked)
        return "4 | I really enjoyed it, a good pick." + (" | 3" if "how memorable" in prompt else "")
    if lines and lines[-1].startswith("Search query"):
        return "funny adventure movies"
    about = _ABOUT.search(prompt)
    if about and lines and lines[-1] in ("Insight:", "1."):  # an insight, or a reflection's numbered insights
        name, body = about.group(1), prompt[about.end() :]
        words = list(dict.fromkeys(w.lower() for w in _CONTENT.findall(body) if w.islower()))[:6] or ["movies"]
        said = [f"{name} keeps coming back to {w} in what {name} remembers." for w in words]
        count = _COUNT.search(prompt)
        if lines[-1] == "Insight:" or not count:
            return said[0]
        return "\n".join([said[0]] + [f"{k}. {said[(k - 1) % len(said)]}" for k in range(2, int(count.group(1)) + 1)])
    chat, names = _CHAT.search(prompt), _CHATTERS.search(prompt)
    if chat and names:  # a whole chat: the first speaker's name is already in the prompt
        first, second = names.group(1), names.group(2)
        said = ("Have you seen anything good lately?", "Yes, I loved a crime movie last week.")
        out = [said[0]] + [f"{(first, second)[k % 2]}: {said[k % 2]}" for k in range(1, int(chat.group(1)))]
        return "\n".join(out)
    return DEFAULT_REPLY


class _BackloggedServer(ThreadingHTTPServer):
    # The listen backlog is fixed when the socket is bound, so it must be a class attribute: with the default (5),
    # concurrent connections beyond it are dropped and retried by the client's TCP stack a second later.
    request_queue_size = 1024
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gives up (its timeout, a closed pool) breaks the connection mid-reply: expected here, so it
        # is logged, not printed as a traceback on stderr (which would mix into the output of the program under test).
        log.debug("local server: connection from %s ended with an error", client_address, exc_info=True)


class LocalServer:
    """See the module docstring. Use as a context manager; ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        per_key_concurrency: int | None = None,
        choice: Literal["first", "random"] = "first",
        reply: str | None = DEFAULT_REPLY,
        seed: int = 0,
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        if per_key_concurrency is not None and per_key_concurrency < 1:
            raise ValueError(f"per_key_concurrency must be >= 1 or None, got {per_key_concurrency}")
        self.latency_s = latency_s
        self.per_key_concurrency = per_key_concurrency
        self.choice = choice
        self.reply = reply
        self.request_count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.waiting = 0
        self.max_waiting = 0
        self._key_index: dict[str, int] = {}
        self._key_counts: list[int] = []
        self._key_slots: dict[str, threading.BoundedSemaphore] = defaultdict(self._new_slot)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: with Nagle's algorithm the body waited for the client's
            # delayed ACK, adding about 40 ms to every answer (real servers set TCP_NODELAY too)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet: the benchmark prints its own progress
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server._serve(self, body)

        self._httpd = _BackloggedServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _new_slot(self) -> threading.BoundedSemaphore:
        return threading.BoundedSemaphore(self.per_key_concurrency or 1)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def key_counts(self) -> list[int]:
        """Requests per distinct key, in the order the keys were first seen."""
        with self._lock:
            return list(self._key_counts)

    def __enter__(self) -> LocalServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- serving --------------------------------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        key = handler.headers.get("authorization", "")
        with self._lock:
            self.request_count += 1
            if key not in self._key_index:
                self._key_index[key] = len(self._key_counts)
                self._key_counts.append(0)
            self._key_counts[self._key_index[key]] += 1
            slot = self._key_slots[key] if self.per_key_concurrency is not None else None
            self.waiting += 1
            self.max_waiting = max(self.max_waiting, self.waiting)
        if slot is not None:
            slot.acquire()
        with self._lock:
            self.waiting -= 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self.respond(handler, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
        finally:
            with self._lock:
                self.in_flight -= 1
            if slot is not None:
                slot.release()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        """Sleep ``latency_s``, then send the normal answer (overridden by the fault-injecting test server)."""
        if self.latency_s:
            time.sleep(self.latency_s)
        self.send_json(handler, 200, self.completion(self.answer(body), prompt_tokens=prompt_tokens(body)))

    def answer(self, body: dict[str, Any]) -> str:
        """The content of a normal answer to ``body`` (see the module docstring)."""
        prompt = str(body["messages"][-1]["content"])
        wants_schema = body.get("response_format", {}).get("type") == "json_schema"
        if wants_schema:
            labels = body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["enum"]
        else:
            labels = trailing_options(prompt)
        if not labels:
            return self.no_options_reply(prompt)
        pick = PICK.search(prompt)
        if pick and pick.group(1) in labels:
            label = pick.group(1)
        elif self.choice == "random" and isinstance(body.get("seed"), int):
            label = labels[int(np.random.default_rng([self.seed, body["seed"]]).integers(len(labels)))]
        elif self.choice == "random":
            with self._lock:
                label = labels[int(self._rng.integers(len(labels)))]
        else:
            label = labels[0]
        return json.dumps({"choice": label}) if wants_schema else label

    def no_options_reply(self, prompt: str) -> str:
        return plausible_reply(prompt) if self.reply is None else self.reply

    @staticmethod
    def completion(content: str | None, refusal: str | None = None, prompt_tokens: int = 7) -> dict[str, Any]:
        words = len((content or "").split())
        return {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "created": 0,
            "model": "local-server",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": max(words, 1),
                "total_tokens": prompt_tokens + max(words, 1),
            },
        }

    @staticmethod
    def send_json(
        handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        LocalServer.send_raw(handler, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def send_raw(
        handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)


def main(argv: list[str] | None = None) -> None:
    """``python -m recagent_gym.llm.local_server --latency-s 0.3 --per-key-concurrency 8``: serve until killed;
    the first line printed is the base URL (benchmarks start several and kill one mid-run)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-s", type=float, default=0.3)
    parser.add_argument("--per-key-concurrency", type=int, default=None,
                        help="requests served at once per API key (one key: the server's capacity, as vLLM's "
                        "--max-num-seqs); default unlimited")  # fmt: skip
    parser.add_argument("--choice", choices=("first", "random"), default="random")
    args = parser.parse_args(argv)
    server = LocalServer(latency_s=args.latency_s, per_key_concurrency=args.per_key_concurrency,
                         choice=args.choice, reply=None)  # fmt: skip
    with server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
