"""Configuration of the dataset and of how profiles and the social graph are built from it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section


class DataConfig(Section):
    dataset: str = "bundled"
    """``bundled`` (MovieLens latest-small shipped with the package) or a path to a MovieLens-1M, MovieLens-100K or
    RecAgent-CSV folder."""

    format: Literal["auto", "ml-latest", "ml-1m", "ml-100k", "recagent-csv"] = "auto"
    """Format of ``dataset``; ``auto`` detects it from the files present."""

    on_bad_row: Literal["error", "skip"] = "error"
    """What a malformed data row does: stop with an error naming file and line, or skip it and report the count."""

    min_user_interactions: int = Field(5, ge=0)
    """Users with fewer interactions than this are dropped when the dataset is loaded."""

    max_users: int | None = Field(None, ge=1)
    """Keep only the first N users (by id) after filtering; None keeps all."""

    profile_source: Literal["dataset", "handwritten", "llm"] = "dataset"
    """How agent profiles are built: aligned to each user's history, read from ``profiles_path``, or LLM-written."""

    profiles_path: str | None = None
    """YAML or CSV file of handwritten profiles (used when ``profile_source`` is ``handwritten``)."""

    descriptions_path: str | None = None
    """RecAgent items CSV (``id,title,genre,description``) whose descriptions are attached to the loaded dataset
    (MovieLens-1M: ids are catalogue rows, titles are checked; ``data/descriptions.py``). They enter the item text
    users read and embedders embed (``data/schema.py::compose_item_text``). None: the dataset's own descriptions, if
    any."""

    social_path: str | None = None
    """CSV of social links ``user_1,user_2,relationship``; None generates a graph (see ``social.generator``)."""

    seed: int = Field(0, ge=0)
    """Seed of the random part of dataset-derived behaviour features (Poster, in datasets without tags)."""
