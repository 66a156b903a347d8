"""The root configuration: one typed section per component, each owned by its subpackage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr

from recagent_gym.data.config import DataConfig
from recagent_gym.envs.config import EnvConfig
from recagent_gym.llm.config import LLMConfig
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.policies.config import TrainConfig
from recagent_gym.recommenders.config import RecommenderConfig
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.config.simulation_section import SimulationConfig
from recagent_gym.settings_section import Section
from recagent_gym.social.config import SocialConfig
from recagent_gym.users.config import UserConfig


class Config(Section):
    data: DataConfig = Field(default_factory=DataConfig)
    """Dataset, profiles and social links."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    """Language-model backend and its wrappers."""

    user: UserConfig = Field(default_factory=UserConfig)
    """User model (LLM agent or classical baseline)."""

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    """The agents' memory."""

    social: SocialConfig = Field(default_factory=SocialConfig)
    """Friendship graph, chat and post."""

    recommender: RecommenderConfig = Field(default_factory=RecommenderConfig)
    """Recommender used by the simulator and evaluations."""

    env: EnvConfig = Field(default_factory=EnvConfig)
    """The Gymnasium environment."""

    simulation: SimulationConfig = Field(default_factory=SimulationConfig)
    """The round-based simulator."""

    train: TrainConfig = Field(default_factory=TrainConfig)
    """RL training."""

    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    """The paper's evaluations (discrimination, sequence generation)."""

    def user_model_sections(self) -> dict[str, Section]:
        """The sections a user model is built from, as keywords of
        :func:`~recagent_gym.users.factory.build_user_model` (the root assembles; the builders take sections)."""
        return {
            "user": self.user,
            "llm_config": self.llm,
            "data": self.data,
            "social": self.social,
            "memory": self.memory,
        }

    def in_run_folder(self, folder: str | Path) -> Config:
        """A copy whose relative run files (the response cache and request record of ``llm`` and of the judge)
        lie in the run's output ``folder``. Every command calls this once it knows its output folder; a resumed
        run's configuration is already placed."""
        config = self.model_copy(deep=True)
        config.llm = self.llm.in_run_folder(folder)
        if self.evaluation.judge_llm is not None:
            config.evaluation.judge_llm = self.evaluation.judge_llm.in_run_folder(folder)
        return config

    def redacted(self) -> dict[str, Any]:
        """Plain data with every secret replaced by ``'***'``: safe for logs, checkpoints and outputs."""
        return _redact(self.model_dump(mode="python"))


def _redact(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "***"
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value
