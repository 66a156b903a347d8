"""Config as an assembler: the root hands each builder its own sections; the builders refuse the root."""

from __future__ import annotations

import inspect

import pytest

from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.recommenders.config import RecommenderConfig
from recagent_gym.recommenders.factory import build_recommender
from recagent_gym.runs.config import Config
from recagent_gym.users.agent import LLMUserModel
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.factory import build_user_model
from recagent_gym.users.recsim import RecSimUser
from tests._agent_fixtures import taste_llm, tiny_dataset


def test_user_models_are_built_from_the_sections_the_root_hands_out() -> None:
    config = Config.model_validate({"user": {"recsim_seed": 7}})
    user = build_user_model("recsim", tiny_dataset(), **config.user_model_sections())
    assert isinstance(user, RecSimUser) and user.config.recsim_seed == 7


def test_the_llm_agents_take_the_user_section_not_the_root() -> None:
    with pytest.raises(TypeError, match="UserConfig"):
        LLMUserModel(tiny_dataset(), Config(), taste_llm(), HashingEmbedder(8))  # type: ignore[arg-type]
    config = Config.model_validate(
        {"social": {"max_chat_turns": 1}, "user": {"decision_strategy": "auto", "prior_weights": None}}
    )
    model = LLMUserModel(
        tiny_dataset(), config.user, taste_llm(), HashingEmbedder(8), social=config.social, llm_backend="openai"
    )
    assert model.config is config.user and model.social_config.max_chat_turns == 1 and model.strategy == "direct"


def test_the_agent_population_has_one_constructor() -> None:
    assert "__init__" not in vars(LLMUserModel)
    assert inspect.signature(LLMUserModel) == inspect.signature(Agents)


def test_recommenders_take_their_section() -> None:
    rec = build_recommender("popularity", tiny_dataset(), RecommenderConfig(), page_size=3)
    assert rec is not None
