"""An agent's profile: RecAgent's fields (id, name, gender, age, traits, career, interests, behaviour features) and
the history statistics of Agent4Rec (activity, diversity, conformity), as plain data (:meth:`Profile.to_dict` /
:meth:`Profile.from_dict`).

Profiles come by the paper's three methods: dataset-aligned (:mod:`~recagent_gym.users.dataset_profiles`),
handwritten in YAML or CSV (:mod:`~recagent_gym.users.handwritten_profiles`) and LLM-written
(:mod:`~recagent_gym.users.llm_profiles`); :mod:`~recagent_gym.users.profile_source` picks the configured one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from recagent_gym.users.profile_fields import features_field, int_field, text_field, text_list_field, unit_field

_KEY_ALIASES = {"id": "user_id", "status": "career", "interest": "interests", "feature": "features"}
PROFILE_KEYS = (
    "user_id",
    "name",
    "gender",
    "age",
    "traits",
    "career",
    "interests",
    "features",
    "activity",
    "diversity",
    "conformity",
    "source",
    "synthesized",
)


@dataclass
class Profile:
    """One agent's profile (RecAgent's fields plus Agent4Rec's history statistics)."""

    user_id: int
    name: str
    gender: str = ""
    age: int = -1
    """-1 when unknown."""
    traits: str = ""
    career: str = ""
    interests: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    """Among :data:`~recagent_gym.data.schema.BEHAVIOUR_FEATURES`."""
    activity: float = 0.0
    diversity: float = 0.0
    conformity: float = 0.5
    source: str = "dataset"
    """``dataset``, ``handwritten`` or ``llm``."""
    synthesized: tuple[str, ...] = field(default=())
    """Fields drawn at random (dataset-aligned) or taken from the dataset after unusable LLM output (``llm``)."""

    def has(self, feature: str) -> bool:
        """Whether the profile has this behaviour feature."""
        return feature in self.features

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("interests", "features", "synthesized"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        """Validate plain data (RecAgent's key names accepted: ``id``, ``status``, ``interest``, ``feature``);
        raises ``ValueError`` naming the key."""
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = _KEY_ALIASES.get(str(key), str(key))
            if name not in PROFILE_KEYS:
                raise ValueError(f"unknown key {key!r} (known: {', '.join(PROFILE_KEYS)})")
            if name in values:
                raise ValueError(f"key {name!r} given twice (directly and through an alias)")
            values[name] = value
        if "user_id" not in values or "name" not in values:
            raise ValueError(f"missing key {'user_id' if 'user_id' not in values else 'name'!r}")
        return cls(
            user_id=int_field(values["user_id"], "user_id", 0, None),
            name=text_field(values["name"], "name", required=True),
            gender=text_field(values.get("gender", ""), "gender"),
            age=int_field(values.get("age", -1), "age", -1, 120),
            traits=", ".join(text_list_field(values.get("traits", ""), "traits")),
            career=text_field(values.get("career", ""), "career"),
            interests=text_list_field(values.get("interests", ()), "interests"),
            features=features_field(values.get("features", ())),
            activity=unit_field(values.get("activity", 0.0), "activity"),
            diversity=unit_field(values.get("diversity", 0.0), "diversity"),
            conformity=unit_field(values.get("conformity", 0.5), "conformity"),
            source=text_field(values.get("source", "handwritten"), "source"),
            synthesized=text_list_field(values.get("synthesized", ()), "synthesized"),
        )
