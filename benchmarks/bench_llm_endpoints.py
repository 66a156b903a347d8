"""LLM-user env steps per second through the vector env against 1, 2 and 4 OpenAI-compatible endpoints.

    python benchmarks/bench_llm_endpoints.py [--endpoints 1,2,4] [--latency-s 0.3] [--capacity 8] [--envs 32]
        [--steps 8] [--kill-at 4]

Each endpoint is the project's fake OpenAI-compatible server (``python -m recagent_gym.llm.local_server``) in its
own process on 127.0.0.1: every request takes ``--latency-s`` and at most ``--capacity`` are served at once (as a
vLLM replica's ``--max-num-seqs``), so one endpoint answers at most ``capacity / latency`` requests per second.
The env is the quickstart's LLM users (``user.model=llm``, no memory records, no social round) through
``llm.base_urls`` (``llm.max_concurrency`` = the capacity, per endpoint), a vector env of ``--envs`` sessions whose
users' decisions go out together each step, random pages. Printed per setting: env steps/s (``envs x vector
steps / wall``, from after the first reset; sessions that end restart inside the steps), the CPU this process spent
per env step (what bounds the steps/s once the endpoints answer a step's requests in one wave), requests per step,
the requests each endpoint served, fallbacks.

``--kill-at K`` (with more than one endpoint) kills the first endpoint's process with SIGKILL in the middle of vector
step K (half a latency in, with requests in flight there) and shows that every step still completes with no
fallback (no decision lost): the pool rests the dead
endpoint and the others take its requests. Not a timed test; numbers depend on the machine's load (print ``uptime``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SETTINGS = ["user.model=llm", "llm.backend=openai", "llm.model=fake", "llm.timeout_s=30", "llm.max_retries=4",
            "llm.endpoint_cooldown_s=30", "user.score_cache=false", "env.page_size=5", "env.max_pages=5"]  # fmt: skip


def start_servers(n: int, latency_s: float, capacity: int) -> tuple[list[subprocess.Popen], list[str]]:
    command = [sys.executable, "-m", "recagent_gym.llm.local_server", "--latency-s", str(latency_s),
               "--per-key-concurrency", str(capacity)]  # fmt: skip
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    return procs, [p.stdout.readline().strip() for p in procs]  # type: ignore[union-attr]


def run(n_endpoints: int, args: argparse.Namespace, dataset: object, embedder: object) -> dict[str, float]:
    from recagent_gym.llm.factory import build_llm
    from recagent_gym.llm.wrapping import close_model
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.make_env import catalogue_vector_env

    procs, urls = start_servers(n_endpoints, args.latency_s, args.capacity)
    killed_at = None
    try:
        urls_setting = "llm.base_urls=[" + ",".join(f'"{u}"' for u in urls) + "]"
        config = load_config("quickstart", [*SETTINGS, urls_setting, f"llm.max_concurrency={args.capacity}"])
        llm = build_llm(config.llm)
        venv = catalogue_vector_env(args.envs, dataset, "llm", config=config, llm=llm, embedder=embedder)
        rng = np.random.default_rng(0)
        begin = time.perf_counter()
        venv.reset(seed=0)
        reset_s = time.perf_counter() - begin
        start, cpu = time.perf_counter(), time.process_time()
        fallbacks = 0
        done = 0
        for step in range(args.steps):
            if args.kill_at is not None and step == args.kill_at and n_endpoints > 1:
                # mid-step: half a latency in, the step's first requests are in flight there
                threading.Timer(args.latency_s / 2, os.kill, (procs[0].pid, signal.SIGKILL)).start()
                killed_at = step
            _, _, _, _, info = venv.step(rng.integers(0, dataset.n_items, size=(args.envs, config.env.page_size)))
            fallbacks += sum(int(e.get("fallbacks", 0)) for e in info["env_infos"])
            done += 1
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        stats = _stats(llm)
        steps = args.envs * args.steps
        requests = sum(s["requests"] for s in stats)
        killed = f"; endpoint 1 killed during vector step {killed_at}" if killed_at is not None else ""
        print(f"{n_endpoints} endpoint(s): {steps / wall:6.2f} env steps/s ({steps} steps in {wall:.1f} s after a "
              f"{reset_s:.1f} s reset; this process's CPU {1000 * cpu / steps:.0f} ms/step), "
              f"{requests / steps:.2f} requests/step, per endpoint {[s['requests'] for s in stats]}, "
              f"failures {[s['failures'] for s in stats]}, fallbacks {fallbacks}, "
              f"{done}/{args.steps} vector steps done{killed}", flush=True)  # fmt: skip
        close_model(llm)
        venv.close()
        return {"endpoints": n_endpoints, "steps_per_s": steps / wall, "fallbacks": fallbacks}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _stats(llm: object) -> list[dict]:
    """The OpenAI backend's per-endpoint counters, under whatever wrappers the factory put around it."""
    seen = llm
    for _ in range(10):
        if hasattr(seen, "endpoint_stats"):
            return seen.endpoint_stats
        seen = getattr(seen, "inner", None) or getattr(seen, "model", None) or getattr(seen, "llm", None)
        if seen is None:
            break
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoints", default="1,2,4")
    parser.add_argument("--latency-s", type=float, default=0.3)
    parser.add_argument("--capacity", type=int, default=8, help="requests each endpoint serves at once")
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8, help="vector steps per setting")
    parser.add_argument("--kill-at", type=int, default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.llm.embedder import SentenceEmbedder
    from recagent_gym.runs.config import load_config

    dataset = load_dataset_from_config(load_config("quickstart").data)
    embedder = SentenceEmbedder()
    print(f"uptime: {os.getloadavg()[0]:.2f} load (1 min), {os.cpu_count()} CPUs; latency {args.latency_s} s, "
          f"capacity {args.capacity} per endpoint, {args.envs} envs, {args.steps} vector steps")  # fmt: skip
    results = [run(int(n), args, dataset, embedder) for n in args.endpoints.split(",")]
    base = results[0]["steps_per_s"]
    for r in results:
        print(f"  {r['endpoints']} endpoint(s): {r['steps_per_s'] / base:.2f}x the first setting")


if __name__ == "__main__":
    main()
