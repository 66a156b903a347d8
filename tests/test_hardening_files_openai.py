"""Distilling from a served model, as a user with a vLLM endpoint would: ``users collect`` with ``llm.backend:
openai`` against a real local OpenAI-compatible HTTP server, then ``users distill`` on those logs.

The remote backend's ``direct`` strategy logs decisions without item scores (Parquet stores the all-missing lists
as ``list<null>``, which used to end the distillation in a TypeError); the distillation fits the decisions
instead and says so in its metrics.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.llm.local_server import LocalServer
from recagent_gym.runs.cli import main
from recagent_gym.runs.distill import logs
from recagent_gym.users.distilled.saved_model import Artefact

KEY = "sk-" + "localtestkey" * 2  # built at run time: no key-shaped string in the repository


@pytest.mark.slow
def test_collect_through_an_openai_compatible_server_then_distill(tmp_path, capsys):
    collected, model = tmp_path / "logs", tmp_path / "model"
    with LocalServer(choice="random", reply=None) as server:
        code = main(["users", "collect", "--out", str(collected), "--sessions", "16", "--max-pages", "3",
                     "--batch", "8", "--no-progress", "--set", "llm.backend=openai",
                     "--set", f"llm.base_url={server.base_url}", "--set", "llm.model=served-model",
                     "--set", f"llm.api_keys=[{KEY}]", "--set", "llm.max_retries=0"])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        assert server.request_count > 0
    frame = logs.read_logs(collected)
    assert frame["session_id"].nunique() == 16
    assert all(math.isnan(v) for s in frame["scores"] for v in s)  # the direct strategy logs no item score
    assert {"watch", "next"} <= set(frame["action"])

    # --split own: the first sessions of the default plan (seed 0) meet exactly the RL split's held-out users
    code = main(["users", "distill", "--logs", str(collected), "--out", str(model), "--epochs", "20", "--split", "own"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "target decisions" in captured.out and "Traceback" not in captured.err
    artefact = Artefact.load(model)
    metrics = artefact.meta["metrics"]
    assert metrics["target"] == "decisions" and metrics["train_items"] == 0
    assert metrics["train_decisions"] + metrics.get("test_decisions", 0) > 0
    assert artefact.meta["logs"]["model"] == "served-model"
    assert np.isfinite(artefact.arrays["user_table"].astype(np.float64)).all()
    rule = artefact.meta["rule"]
    assert math.isfinite(rule["noise_std"]) and math.isfinite(rule["rating_intercept"])
    assert KEY not in json.dumps(artefact.meta)  # the key never reaches the artefact


def test_distilled_model_of_decisions_drives_the_distilled_users(tmp_path):
    """The artefact of a decisions-only fit is a working user model (tiny data, direct-strategy logs)."""
    from recagent_gym.llm.testing import HashingEmbedder
    from recagent_gym.runs.distill.collect import collect
    from recagent_gym.runs.distill.fit import distill
    from recagent_gym.runs.distill.objective import FitSettings
    from recagent_gym.users.distilled.user import DistilledUser
    from recagent_gym.users.protocol import Context, Page
    from tests._agent_fixtures import make_config, make_model, tiny_dataset

    direct = {"user": {"decision_strategy": "direct"}}
    collect(make_model(overrides=direct), tiny_dataset(), tmp_path / "logs", sessions=24, batch=6, max_pages=4,
            progress=False)  # fmt: skip
    assert all(math.isnan(v) for s in logs.read_logs(tmp_path / "logs")["scores"] for v in s)
    summary = distill(tmp_path / "logs", tiny_dataset(), make_config(direct), tmp_path / "m",
                      settings=FitSettings(epochs=20, split="own"), embedder=HashingEmbedder(32))  # fmt: skip
    assert "target decisions" in summary
    user = DistilledUser(tiny_dataset(), tmp_path / "m")
    rng = np.random.default_rng(0)
    user.start_session(0, rng)
    response = user.respond(Page(tuple(range(5)), 0), Context(user_id=0, step=0), rng)
    assert response.action.name in {"WATCH", "NEXT", "SEARCH", "LEAVE"}
