"""Every script in ``benchmarks/`` runs at a tiny size, as a subprocess, so that none rots.

Benchmarks print figures and are not timed tests: this checks only that each one starts, runs its whole path and
exits 0. A new script must be added to :data:`TINY` (the test below fails on a script without an entry).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

TINY: dict[str, list[str]] = {
    "bench_agent.py": ["--decisions", "2", "--batch-decisions", "4", "--users", "4", "--check-users", "2",
                       "--negatives", "2"],
    "bench_data_load.py": ["--repeats", "1"],
    "bench_embed_contention.py": ["--busy", "0,1", "--calls", "2"],
    "bench_discrimination.py": ["--users", "1", "--no-personalization-check"],
    "bench_embed_agreement.py": ["--agents", "3", "--rounds", "1", "--repeats", "1"],
    "bench_embed_floor.py": ["--agents", "4", "--rounds", "1", "--repeats", "1"],
    "bench_env.py": ["--steps", "200"],
    "bench_env_distilled.py": ["--steps", "200"],
    "bench_env_llm.py": ["--steps", "4", "--envs", "2", "--scripted"],
    "bench_env_v1_vector.py": ["--steps", "4", "--envs", "2", "--llm", "scripted", "--embedder", "hashing",
                               "--item-vectors", "cold"],
    "bench_history_recall.py": ["--users", "20", "--models", "popularity,itemknn,mf"],
    "bench_affinity_dims.py": ["--users", "20", "--dims", "4,8", "--negatives", "10"],
    "bench_llm_endpoints.py": ["--endpoints", "1,2", "--latency-s", "0.01", "--envs", "2", "--steps", "1"],
    "bench_llm_embedded.py": ["--repeats", "1", "--memories", "2", "--threads", "1", "--candidates", "3"],
    "bench_llm_faults.py": ["--trickle", "1", "--timeout", "0.3", "--reply-mb", "0.05"],
    "bench_llm_openai.py": ["--n", "4", "--concurrency", "1", "2", "--latency", "0.01"],
    "bench_memory.py": ["--sizes", "50"],
    "bench_mf_retrain.py": ["--seeds", "0", "--every", "200", "--modes", "none,incremental"],
    "bench_memory_writes.py": ["--agents", "1"],
    "bench_ppo.py": ["--steps", "64"],
    "bench_pools.py": ["--users", "20"],
    "bench_recsim_user.py": ["--calls", "100", "--repeats", "1"],
    "bench_request_overhead.py": ["--latency", "0.01", "--requests", "2"],
    "bench_rl_v1.py": ["--steps", "64", "--updates", "2"],
    "bench_rllib.py": ["--users", "recsim", "--runners", "1", "--steps", "128", "--skip-sb3"],
    "bench_simulator.py": ["--agents", "3", "--rounds", "1"],
    "bench_simulator_endpoints.py": ["--agents", "3", "--endpoints", "1", "--latency-s", "0.01"],
    "probe_embedded_invariance.py": ["--threads", "1"],
    "probe_hidden_nutrition.py": ["--users", "4", "--folds", "2"],
    "probe_ppo_collapse.py": ["--steps", "2048", "--every", "2048", "--users", "4"],
    "probe_page_calibration.py": ["--boot", "10", "--recommenders", "random,popularity,quality,itemknn,mf,oracle"],
    "probe_personal_nutrition.py": ["--shares", "0,1", "--users", "4", "--env-seeds", "0"],
    "probe_reshown_pages.py": ["--steps", "64", "--users", "4"],
    "probe_round_requests.py": ["--agents", "3", "--rounds", "1", "--embedder", "hashing", "--latency-ms", "10"],
    "probe_user_time_popularity.py": ["--windows", "30"],
    "profile_round.py": ["--agents", "3", "--rounds", "1", "--embedder", "hashing", "--top", "3"],
    "step_path.py": ["--env", "v1"],
}  # fmt: skip
NEEDS_RAY = {"bench_rllib.py"}


def test_every_benchmark_has_a_tiny_run():
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert sorted(TINY) == scripts, f"add tiny arguments for {sorted(set(scripts) - set(TINY))} to TINY"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs_at_a_tiny_size(script: str, tmp_path: Path):
    if script in NEEDS_RAY:
        pytest.importorskip("ray", reason="the [ray] extra is not installed")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }  # the cache folder stays the suite's (the embedded model's file is assembled once)
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *TINY[script]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, f"{script} exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    assert run.stdout.strip(), f"{script} printed nothing"
