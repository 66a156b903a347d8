"""``llm.base_urls`` as a pool, against real HTTP servers on 127.0.0.1: requests spread by in-flight load, each
endpoint's concurrency and rate limit respected, a failed endpoint rested and tried again later, requests waiting at
an endpoint that fails moved elsewhere before they are sent, and a server killed mid-run losing no request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.local_server import LocalServer
from recagent_gym.llm.openai_backend import OpenAIBackend

ROOT = Path(__file__).resolve().parent.parent


class Replica(LocalServer):
    """A local server that records when each request arrived and can be down (HTTP 503 for every request)."""

    def __init__(self, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.down = False
        self.refused = 0
        self.arrivals: list[float] = []

    def respond(self, handler, body) -> None:  # type: ignore[no-untyped-def]
        self.arrivals.append(time.monotonic())
        if self.down:
            self.refused += 1
            time.sleep(self.latency_s)
            self.send_json(handler, 503, {"error": {"message": "replica down"}})
            return
        super().respond(handler, body)


def _backend(urls: list[str], **extra: object) -> OpenAIBackend:
    values: dict[str, object] = {
        "backend": "openai", "base_urls": urls, "model": "replica", "timeout_s": 5.0, "backoff_base_s": 0.02,
        "max_retries": 3, "max_concurrency": 4, "structured_output": "text", "endpoint_cooldown_s": 0.3,
    }  # fmt: skip
    values.update(extra)
    return OpenAIBackend(LLMConfig(**values))


def test_a_slow_endpoint_gets_fewer_requests_and_no_endpoint_exceeds_its_concurrency() -> None:
    with Replica(latency_s=0.25) as slow, Replica(latency_s=0.02) as fast:
        backend = _backend([slow.base_url, fast.base_url])
        answers = backend.generate([f"say {i}" for i in range(48)], seed=0)
        backend.close()
    assert len(answers) == 48 and all(g.text for g in answers)
    assert slow.request_count + fast.request_count == 48
    assert fast.request_count >= 3 * slow.request_count  # least in flight: the fast one frees its slots sooner
    assert slow.max_in_flight <= 4 and fast.max_in_flight <= 4


def test_each_endpoint_rate_limit_spaces_its_requests() -> None:
    with Replica() as a, Replica() as b:
        backend = _backend([a.base_url, b.base_url], endpoint_rpm=600.0)  # one start per 0.1 s per endpoint
        start = time.monotonic()
        answers = backend.generate([f"say {i}" for i in range(10)], seed=0)
        elapsed = time.monotonic() - start
        backend.close()
    assert all(g.text for g in answers)
    assert a.request_count == b.request_count == 5
    for server in (a, b):
        gaps = [t1 - t0 for t0, t1 in zip(server.arrivals, server.arrivals[1:], strict=False)]
        # 0.1 s apart on average, less the jitter of the first and last arrivals: one arrival delayed on a busy
        # machine shortens the next gap (0.144 then 0.051 s at load 13 on 2 cores), never the span
        assert sum(gaps) / len(gaps) >= 0.08, gaps
    assert elapsed >= 0.38  # five starts per endpoint: the last 0.4 s after the first


def test_a_failed_endpoint_rests_then_comes_back_after_one_probe() -> None:
    with Replica(latency_s=0.02) as flaky, Replica(latency_s=0.02) as steady:
        backend = _backend([flaky.base_url, steady.base_url])
        flaky.down = True
        first = backend.generate([f"one {i}" for i in range(12)], seed=1)
        assert all(g.text for g in first)  # nothing lost: the refused requests were answered by the other
        refused = flaky.refused
        assert 1 <= refused <= 4
        assert backend.endpoint_stats[0]["resting"] and backend.endpoint_stats[0]["failures"] == refused
        flaky.down = False
        time.sleep(0.35)  # the rest is over: the next request is a probe
        before = flaky.request_count
        second = backend.generate([f"two {i}" for i in range(16)], seed=2)
        backend.close()
    assert all(g.text for g in second)
    assert flaky.request_count - before >= 4  # back in service after its probe succeeded
    assert flaky.refused == refused


def test_requests_waiting_when_an_endpoint_fails_never_go_there() -> None:
    with Replica(latency_s=0.2) as failing, Replica(latency_s=0.02) as healthy:
        failing.down = True
        backend = _backend([failing.base_url, healthy.base_url], max_concurrency=1, max_retries=1,
                           endpoint_cooldown_s=30.0)  # fmt: skip
        answers = backend.generate([f"wait {i}" for i in range(8)], seed=3)
        backend.close()
    assert all(g.text for g in answers)
    assert failing.refused == 1  # only the first request went there; the ones waiting went to the other
    assert healthy.request_count == 8 and backend.retries == 1


@pytest.mark.slow
def test_an_endpoint_killed_mid_run_loses_no_request() -> None:
    server = ["-m", "recagent_gym.llm.local_server", "--latency-s", "0.2", "--per-key-concurrency", "4"]
    command = [sys.executable, *server]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        urls = [p.stdout.readline().strip() for p in procs]  # type: ignore[union-attr]
        backend = _backend(urls, endpoint_cooldown_s=5.0)
        killer = threading.Timer(0.3, lambda: os.kill(procs[0].pid, signal.SIGKILL))
        killer.start()  # in the middle of the batch: requests in flight there and waiting for it
        answers = backend.generate([f"kill {i}" for i in range(40)], seed=4)
        killer.join()
        stats = backend.endpoint_stats
        backend.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert len(answers) == 40 and all(g.text for g in answers)
    assert stats[0]["failures"] >= 1 and stats[0]["resting"]
    assert stats[1]["requests"] >= 20


def test_the_pool_rests_a_failing_endpoint_longer_each_time_and_probes_one_request_at_a_time() -> None:
    from recagent_gym.llm.endpoints import EndpointPool

    now = [0.0]
    pool = EndpointPool.build([None, None], ["a", "b"], lambda url: [object()], max_concurrency=4, cooldown_s=1.0)
    pool.clock = lambda: now[0]
    a, b = pool.endpoints
    assert pool.pick() is a  # equal load: the first listed
    a.load = 2
    assert pool.pick() is b  # the least loaded
    pool.rest(a)
    pool.rest(a)  # a second request sent before the rest began: the rest is not lengthened
    assert a.failures == 2 and a.streak == 1 and a.resting_until == 1.0
    assert pool.pick() is b and pool.pick(avoid=b) is b  # resting: nothing goes to a while b is available
    now[0] = 1.5
    a.load = 0
    assert pool.pick(avoid=b) is a  # the rest is over: a probe
    a.load = 1
    assert pool.pick(avoid=b) is b  # one probe at a time
    pool.rest(a)  # the probe failed: twice as long
    assert a.resting_until == 1.5 + 2.0
    b.load = b.capacity
    assert pool.pick() is None  # b full, a resting with b available later: wait
    b.load, now[0] = 0, 4.0
    a.load = 0
    pool.succeeded(a)
    a.load = 3
    assert pool.pick(avoid=b) is a and pool.available(a, now[0])  # in full service: several requests at once
