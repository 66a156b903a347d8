"""MiniLM in a process of its own, so the simulator's threads and the model never wait on one interpreter lock.

torch gives the interpreter lock back on every operation of a forward pass (about 170 for MiniLM) and takes it
again after. In a simulator round a hundred agent threads hold the lock in turn, so each time the model's thread
waits for it, a whole switch interval at worst: measured on a 2-core AVX2 machine, embedding one text took 25 ms
alone and 2.1 s beside one busy Python thread (6.0 s beside four; in its own process 48 and 114 ms:
``benchmarks/bench_embed_contention.py``, ``docs/speed.md``). In a process of its own the
model runs its forward without asking anybody; the calling thread only sends the texts and reads the vectors back.

:class:`ProcessEmbedder` is a :class:`~recagent_gym.llm.embedder.SentenceEmbedder` in a child interpreter
(``python -m recagent_gym.llm.embedder_process``: it never imports the caller's script, so a script needs no
``if __name__ == "__main__"`` guard), answering calls over a local socket: the same model, threads and precision,
so the same vectors, bitwise (a text's vector never depends on what it is batched with, nor on which process
computes it). Calls may come from several threads at once; the child runs up to ``workers`` of them together (the
shared embedder's urgent lane beside a long call). Its CPU is counted in ``cpu_s`` as the in-process embedder's is
(the child's threads' CPU on the calls).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Client, Listener
from pathlib import Path
from typing import Any

import numpy as np

Reply = tuple[int, Any, float, float, float]
"""A call's number, its vectors (or the exception it raised), the child's CPU seconds on it, the child's CPU
seconds in all so far, and its peak resident memory (MB)."""


def _serve(conn: Any, options: dict[str, Any], workers: int) -> None:  # pragma: no cover - runs in the child
    """The child: load the model, say what it is, then answer ``(number, texts)`` until ``None`` comes."""
    import resource

    from recagent_gym.llm.embedder import SentenceEmbedder

    try:
        model = SentenceEmbedder(**options)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    about = {"name": model.name, "dim": model.dim, "store_identity": model.store_identity,
             "precision": model.precision, "packed": model.packed, "cpu": time.process_time()}  # fmt: skip
    conn.send(("ready", about))
    sending = threading.Lock()

    def answer(number: int, texts: list[str]) -> None:
        started = time.thread_time()
        try:
            result: Any = model(texts)
        except Exception as exc:
            result = exc
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
        with sending:
            conn.send((number, result, time.thread_time() - started, time.process_time(), peak))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
        while (request := conn.recv()) is not None:
            pool.submit(answer, *request)


AUTHKEY_ENV = "RECAGENT_GYM_EMBEDDER_AUTHKEY"
"""How the child gets the connection's key (hex): from its own environment, never on its command line."""


def main() -> None:  # pragma: no cover - runs in the child
    """The child's entry: ``python -m recagent_gym.llm.embedder_process ADDRESS OPTIONS_JSON WORKERS``."""
    address, options, workers = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    conn = Client(address, family="AF_UNIX", authkey=bytes.fromhex(os.environ.pop(AUTHKEY_ENV)))
    with contextlib.suppress(EOFError):  # the parent has gone
        _serve(conn, options, workers)


class ProcessEmbedder:
    """all-MiniLM-L6-v2 (:class:`~recagent_gym.llm.embedder.SentenceEmbedder` with ``options``: JSON values) in a
    child process; see the module docstring. ``close()`` (or the end of the parent) stops the child."""

    own_process = True
    """What ``evaluate efficiency`` reads to name it (``minilm-fp32-own-process``)."""

    def __init__(self, *, workers: int = 2, start_timeout_s: float = 300.0, **options: Any) -> None:
        key = secrets.token_bytes(16)
        folder = tempfile.mkdtemp(prefix="recagent-embedder-")
        address = str(Path(folder) / "socket")
        with Listener(address, family="AF_UNIX", authkey=key) as listener:
            command = [sys.executable, "-m", __name__, address, json.dumps(options), str(workers)]
            environment = {**os.environ, AUTHKEY_ENV: key.hex()}
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=environment)
            self._conn = _accept(listener, self._process, start_timeout_s)
        with contextlib.suppress(OSError):  # the listener removed its socket file on closing
            os.rmdir(folder)
        if not self._conn.poll(start_timeout_s):
            self._process.kill()
            raise RuntimeError(f"the embedder process did not load its model within {start_timeout_s:g} s")
        status, info = self._conn.recv()
        if status != "ready":
            self._process.wait(5)
            raise RuntimeError(f"the embedder process could not load the model: {info}")
        self.name: str = info["name"]
        self.dim: int = info["dim"]
        self._store_identity: str | None = info["store_identity"]
        self.precision: str = info["precision"]
        self.packed: bool = info["packed"]
        self.texts_embedded = 0
        self.cpu_s = 0.0
        """Texts embedded and the child's CPU seconds on them (read by ``evaluate efficiency``)."""
        self.process_cpu_s: float = info["cpu"]
        self.peak_rss_mb = 0.0
        """The child's CPU seconds in all and its peak resident memory, as of its last answer (``evaluate
        efficiency`` adds them to the simulator's own: the work is the same, done elsewhere)."""
        self._numbers = itertools.count()
        self._calls: dict[int, Future[np.ndarray]] = {}
        self._lock = threading.Lock()
        self._stopped: str | None = None
        """Why no call can be answered any more (set by the reader when the child goes), else None."""
        self._reader = threading.Thread(target=self._read, name="embedder-replies", daemon=True)
        self._reader.start()

    @property
    def store_identity(self) -> str | None:
        """The child's model's (the same computation as in this process: ``SentenceEmbedder.store_identity``)."""
        return self._store_identity

    def __call__(self, texts: Any) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        future: Future[np.ndarray] = Future()
        with self._lock:
            if self._stopped is not None:
                raise RuntimeError(f"the embedder process {self._stopped}")
            number = next(self._numbers)
            self._calls[number] = future
            self._conn.send((number, texts))
        return future.result()

    def _read(self) -> None:
        """Hand each reply to its caller; when the child goes, every waiting caller gets the error."""
        try:
            while True:
                number, result, cpu, process_cpu, peak = self._conn.recv()
                with self._lock:
                    future = self._calls.pop(number)
                    self.process_cpu_s, self.peak_rss_mb = process_cpu, peak
                    if not isinstance(result, BaseException):
                        self.texts_embedded += len(result)
                        self.cpu_s += cpu
                future.set_exception(result) if isinstance(result, BaseException) else future.set_result(result)
        except Exception as exc:  # the child has gone (EOFError, OSError), or a reply that cannot be read
            gone = isinstance(exc, (EOFError, OSError))
            with self._lock:
                self._stopped = "has stopped" if gone else f"sent a reply that could not be read ({exc!r})"
                waiting, self._calls = self._calls, {}
            for future in waiting.values():
                future.set_exception(RuntimeError(f"the embedder process {self._stopped}"))

    def close(self) -> None:
        """Stop the child (idempotent)."""
        if self._process.poll() is None:
            try:
                with self._lock:
                    self._conn.send(None)
            except OSError:
                pass
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        with self._lock:
            self._stopped = self._stopped or "has stopped"
        self._conn.close()

    def __repr__(self) -> str:
        return f"ProcessEmbedder({self.name!r}, precision={self.precision!r}, pid={self._process.pid})"


def _accept(listener: Listener, process: subprocess.Popen[bytes], timeout_s: float) -> Any:
    """The child's connection, or an error if the child exits (or does not connect within ``timeout_s``) first."""
    accepted: list[Any] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed under it: the child never came
            accepted.append(listener.accept())

    waiter = threading.Thread(target=accept, daemon=True)
    waiter.start()
    deadline = time.monotonic() + timeout_s
    while waiter.is_alive() and process.poll() is None and time.monotonic() < deadline:
        waiter.join(0.05)
    if not accepted:
        process.kill()
        raise RuntimeError(f"the embedder process exited (code {process.poll()}) or did not connect within "
                           f"{timeout_s:g} s; its error is above")  # fmt: skip
    return accepted[0]


if __name__ == "__main__":  # pragma: no cover - the child
    main()
