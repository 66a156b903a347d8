"""Which requests take a full backend's slots first (``llm/priority.py``): the pool's queue is ordered by each
request's priority (first come first within one), a request cancelled while it waits leaves no slot taken, and the
priority of the calling context reaches the pool through the backend's event loop; a pipelined simulator round
sends its chains' pages ahead of the work prepared beside them. A simulation freezes its set-up heap while it runs
(full garbage collections of it stopped every thread, ``docs/speed.md``)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from recagent_gym.llm import endpoints
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.endpoints import EndpointPool
from recagent_gym.llm.local_server import LocalServer
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.priority import REQUEST_PRIORITY, at_priority
from recagent_gym.runs.simulator.sessions import AHEAD_PRIORITY, CHAIN_PRIORITY, WRITES_PRIORITY


def _pool(capacity: int) -> EndpointPool:
    return EndpointPool.build([None], ["a"], lambda url: [object()], max_concurrency=capacity, cooldown_s=1.0)


def test_waiting_requests_take_a_freed_slot_highest_priority_first_then_in_order_of_arrival() -> None:
    async def scenario() -> list[str]:
        pool = _pool(1)
        order: list[str] = []
        release = asyncio.Event()

        async def request(name: str, priority: int) -> None:
            async with pool.slot(priority=priority):
                order.append(name)
                if name == "holder":
                    await release.wait()

        holder = asyncio.create_task(request("holder", 0))
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(request(n, p)) for n, p in
                   [("low-1", 0), ("high", 2), ("low-2", 0), ("mid", 1), ("high-2", 2)]]  # fmt: skip
        await asyncio.sleep(0.01)
        assert pool.waiting == 5 and order == ["holder"]
        release.set()
        await asyncio.gather(holder, *waiting)
        assert pool.endpoints[0].load == 0 and pool.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["holder", "high", "high-2", "mid", "low-1", "low-2"]


def test_a_request_cancelled_while_waiting_takes_no_slot() -> None:
    async def scenario() -> None:
        pool = _pool(1)
        release = asyncio.Event()

        async def hold() -> None:
            async with pool.slot():
                await release.wait()

        async def quick(done: list[str], name: str) -> None:
            async with pool.slot(priority=5):
                done.append(name)

        done: list[str] = []
        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        doomed = asyncio.create_task(quick(done, "doomed"))
        kept = asyncio.create_task(quick(done, "kept"))
        await asyncio.sleep(0.01)
        doomed.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(holder, kept)
        assert doomed.cancelled() and done == ["kept"]
        assert pool.endpoints[0].load == 0 and pool.waiting == 0 and not pool.queue

    asyncio.run(scenario())


def test_the_calling_threads_priority_reaches_the_pool(monkeypatch: Any) -> None:
    seen: list[int] = []
    original = endpoints.EndpointPool.slot

    def slot(self: EndpointPool, avoid: Any = None, priority: int = 0) -> Any:
        seen.append(priority)
        return original(self, avoid, priority)

    monkeypatch.setattr(endpoints.EndpointPool, "slot", slot)
    with LocalServer() as server:
        backend = OpenAIBackend(
            LLMConfig(backend="openai", base_url=server.base_url, model="m", api_keys=["k"], structured_output="text")
        )
        try:
            thread = threading.Thread(target=at_priority(7, lambda: backend.generate(["a", "b"])))
            thread.start()
            thread.join(10)
            backend.generate(["c"])
        finally:
            backend.close()
    assert seen == [7, 7, 0]


def test_a_pipelined_round_sends_pages_first_then_chain_ends_then_work_prepared_ahead(tmp_path: Path) -> None:
    from recagent_gym.runs.simulator import runner
    from tests._sim_fixtures import make_config, make_embedder, make_llm

    class Recording:
        """The scripted model, noting the priority of every call and whether it was a page decision."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.calls = inner, []
            self._lock = threading.Lock()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def _note(self, prompts: Any) -> None:
            with self._lock:
                self.calls.extend((REQUEST_PRIORITY.get(), p) for p in prompts)

        def generate(self, prompts: Any, **kwargs: Any) -> Any:
            self._note(prompts)
            return self.inner.generate(prompts, **kwargs)

        def choose(self, prompts: Any, options: Any, **kwargs: Any) -> Any:
            self._note(prompts)
            return self.inner.choose(prompts, options, **kwargs)

    llm = Recording(make_llm())
    config = make_config("simulation.rounds=1", "simulation.active_prob=1.0", "simulation.pipelines=on")
    sim = runner.start(config, tmp_path / "run", llm=llm, embedder=make_embedder())
    sim.run()
    sim.close()
    levels = {level for level, _ in llm.calls}
    pages = [level for level, prompt in llm.calls if "loved, one per line" in prompt]  # the page items' scores
    assert pages and set(pages) == {CHAIN_PRIORITY}
    assert {WRITES_PRIORITY, AHEAD_PRIORITY} <= levels  # chain ends, and the feelings prepared beside the pages
    assert REQUEST_PRIORITY.get() == 0  # the caller's own context untouched


def test_a_run_moves_its_set_up_heap_out_of_the_collectors_sight_until_closed(tmp_path: Path) -> None:
    import gc

    from recagent_gym.runs.simulator import runner
    from tests._sim_fixtures import make_config, make_embedder, make_llm

    sim = runner.start(make_config("simulation.rounds=1"), tmp_path / "run", llm=make_llm(), embedder=make_embedder())
    try:
        sim.run()
        assert gc.get_freeze_count() > 0  # the world built before the rounds is no longer scanned
    finally:
        sim.close()
    assert gc.get_freeze_count() == 0
