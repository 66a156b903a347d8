"""Agent profiles by the paper's three methods: dataset-aligned, handwritten (YAML/CSV) and LLM-generated.

A :class:`Profile` holds RecAgent's fields (id, name, gender, age, traits, career, interests, behaviour features)
and the history statistics of Agent4Rec (activity, diversity, conformity). Profiles are plain data
(:meth:`Profile.to_dict` / :meth:`Profile.from_dict`).

**Dataset-aligned** (:func:`profiles_from_dataset`): interests are the user's top genres, features come from the
history statistics (rules in :mod:`recagent_gym.data.stats`), and demographics come from the dataset. Fields the
dataset lacks are drawn from the given generator and listed in ``Profile.synthesized``: a name from a small
built-in list (first names by gender, unique within the call), gender uniform over female/male, age uniform in
18..65, three traits from :data:`TRAITS`, a career from the MovieLens-1M occupation names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

from recagent_gym.data.config import DataConfig
from recagent_gym.data.fields import ML1M_OCCUPATIONS, split_list
from recagent_gym.data.reader import BadRows, read_table
from recagent_gym.data.schema import BEHAVIOUR_FEATURES, DataError, Dataset
from recagent_gym.prompts import profile_generation
from recagent_gym.settings_section import ConfigError

logger = logging.getLogger(__name__)

FEMALE_NAMES = (
    "Alice",
    "Amara",
    "Anna",
    "Chloe",
    "Elena",
    "Emma",
    "Fatima",
    "Grace",
    "Hana",
    "Isabel",
    "Julia",
    "Keiko",
    "Laura",
    "Leila",
    "Maria",
    "Maya",
    "Nadia",
    "Olivia",
    "Priya",
    "Rosa",
    "Sara",
    "Sofia",
    "Wen",
    "Zoe",
)
MALE_NAMES = (
    "Adam",
    "Ahmed",
    "Carlos",
    "Daniel",
    "David",
    "Diego",
    "Ethan",
    "Felix",
    "Hiro",
    "Ivan",
    "James",
    "Jonas",
    "Kwame",
    "Leo",
    "Lucas",
    "Marco",
    "Mateo",
    "Noah",
    "Omar",
    "Paul",
    "Ravi",
    "Samuel",
    "Tom",
    "Wei",
)
LAST_NAMES = (
    "Adams",
    "Baker",
    "Chen",
    "Costa",
    "Diaz",
    "Evans",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kim",
    "Kowalski",
    "Lopez",
    "Martin",
    "Nguyen",
    "Novak",
    "Okafor",
    "Patel",
    "Rossi",
    "Silva",
    "Smith",
    "Tanaka",
    "Wang",
)
TRAITS = (
    "adventurous",
    "analytical",
    "ambitious",
    "calm",
    "cautious",
    "cheerful",
    "compassionate",
    "curious",
    "energetic",
    "imaginative",
    "introverted",
    "nostalgic",
    "optimistic",
    "outgoing",
    "patient",
    "practical",
    "romantic",
    "sceptical",
    "sociable",
    "thoughtful",
    "witty",
)
_CAREERS = tuple(name for code, name in ML1M_OCCUPATIONS.items() if code != 0)
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
            user_id=_int(values["user_id"], "user_id", 0, None),
            name=_text(values["name"], "name", required=True),
            gender=_text(values.get("gender", ""), "gender"),
            age=_int(values.get("age", -1), "age", -1, 120),
            traits=", ".join(_strings(values.get("traits", ""), "traits")),
            career=_text(values.get("career", ""), "career"),
            interests=_strings(values.get("interests", ()), "interests"),
            features=_features(values.get("features", ())),
            activity=_unit(values.get("activity", 0.0), "activity"),
            diversity=_unit(values.get("diversity", 0.0), "diversity"),
            conformity=_unit(values.get("conformity", 0.5), "conformity"),
            source=_text(values.get("source", "handwritten"), "source"),
            synthesized=_strings(values.get("synthesized", ()), "synthesized"),
        )


def profiles_from_dataset(dataset: Dataset, rng: np.random.Generator) -> list[Profile]:
    """One dataset-aligned profile per user, in user-id order (see the module docstring)."""
    used: set[str] = set(n for n in dataset.users["name"] if n)
    profiles = []
    for row in dataset.users.itertuples(index=False):
        synthesized = []
        gender = row.gender
        if not gender:
            gender = str(rng.choice(("female", "male")))
            synthesized.append("gender")
        name = row.name
        if not name:
            name = _draw_name(gender, used, rng)
            synthesized.append("name")
        age = int(row.age)
        if age < 0:
            age = int(rng.integers(18, 66))
            synthesized.append("age")
        traits = row.traits
        if not traits:
            traits = ", ".join(str(t) for t in rng.choice(TRAITS, size=3, replace=False))
            synthesized.append("traits")
        career = row.career
        if not career:
            career = str(rng.choice(_CAREERS))
            synthesized.append("career")
        profiles.append(
            Profile(
                user_id=int(row.user_id),
                name=name,
                gender=gender,
                age=age,
                traits=traits,
                career=career,
                interests=tuple(row.interests),
                features=tuple(row.features),
                activity=float(row.activity),
                diversity=float(row.diversity),
                conformity=float(row.conformity),
                source="dataset",
                synthesized=tuple(synthesized),
            )
        )
    return profiles


def load_profiles(path: str | Path) -> list[Profile]:
    """Handwritten profiles from YAML (a list of mappings, or ``{profiles: [...]}``) or CSV (RecAgent's user
    columns ``id,name,gender,age,traits,status,interest,feature``). ``user_id``/``id`` defaults to the position;
    errors name the file, the entry (and its line) and the key."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such profiles file")
    if path.suffix.lower() in (".yaml", ".yml"):
        entries = _yaml_entries(path)
    elif path.suffix.lower() == ".csv":
        entries = _csv_entries(path)
    else:
        raise DataError(f"{path}: profiles must be a .yaml/.yml or .csv file")
    profiles: list[Profile] = []
    seen: dict[int, int] = {}
    for index, (line, entry) in enumerate(entries):
        where = f"{path}, profile {index + 1} (line {line})"
        if not isinstance(entry, Mapping):
            raise DataError(f"{where}: expected a mapping of keys to values, got {type(entry).__name__}")
        data = {"source": "handwritten", **entry}
        if "user_id" not in data and "id" not in data:
            data["user_id"] = index
        try:
            profile = Profile.from_dict(data)
        except ValueError as exc:
            raise DataError(f"{where}: {exc}") from exc
        if profile.user_id in seen:
            raise DataError(f"{where}: duplicate user_id {profile.user_id} (first in profile {seen[profile.user_id]})")
        seen[profile.user_id] = index + 1
        profiles.append(profile)
    return profiles


class GeneratedProfiles(NamedTuple):
    """LLM-written profiles, and the fallbacks to dataset-aligned values (counted, with the reasons)."""

    profiles: list[Profile]
    fallback_profiles: int
    """Profiles where no field of the LLM output was usable (wholly dataset-aligned)."""
    fallback_fields: int
    """Fields, over all profiles, taken from the dataset-aligned profile because the output was unusable."""
    problems: list[str]


def generate_profiles(
    dataset: Dataset,
    generate: Callable[[list[str]], list[str]],
    rng: np.random.Generator,
    *,
    batch_size: int = 16,
    n_titles: int = 5,
) -> GeneratedProfiles:
    """Profiles written by an LLM from each user's history (prompt contract: :mod:`recagent_gym.prompts.
    profile_generation`).

    ``generate`` maps a batch of prompts to one continuation each (bind the model, ``max_tokens`` ~ 60 and
    ``stop=["\\n\\n"]`` in it). Interests, features and statistics stay dataset-aligned; name, gender, age, traits and
    career come from the output, and each field that is missing or invalid falls back to the dataset-aligned value
    (listed in ``synthesized``, counted in the result and logged).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    base = profiles_from_dataset(dataset, rng)
    prompts = [
        profile_generation.build(p.interests, _recent_titles(dataset, p.user_id, n_titles), p.features) for p in base
    ]
    outputs: list[str] = []
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        answers = list(generate(batch))
        if len(answers) != len(batch):
            raise ValueError(f"generate returned {len(answers)} outputs for {len(batch)} prompts")
        outputs.extend(answers)
    profiles, problems = [], []
    fallback_profiles = fallback_fields = 0
    for profile, text in zip(base, outputs, strict=True):
        fields, issues = profile_generation.parse(text)
        fallback_fields += len(issues)
        fallback_profiles += not fields
        problems.extend(f"user {profile.user_id}: {issue}" for issue in issues)
        values = {**profile.to_dict(), **fields, "source": "llm"}
        values["synthesized"] = [k for k in profile_generation.FIELDS if k not in fields]
        profiles.append(Profile.from_dict(values))
    if fallback_fields:
        logger.warning(
            "profile generation: %d of %d fields fell back to dataset-aligned values (%d whole profiles); first: %s",
            fallback_fields,
            len(base) * len(profile_generation.FIELDS),
            fallback_profiles,
            "; ".join(problems[:3]),
        )
    return GeneratedProfiles(profiles, fallback_profiles, fallback_fields, problems)


def _recent_titles(dataset: Dataset, user_id: int, n: int) -> list[str]:
    history = dataset.user_history(user_id)
    return [str(dataset.items.at[int(i), "title"]) for i in history["item_id"].to_numpy()[::-1][:n]]


def _draw_name(gender: str, used: set[str], rng: np.random.Generator) -> str:
    firsts = {"female": FEMALE_NAMES, "male": MALE_NAMES}.get(gender, FEMALE_NAMES + MALE_NAMES)
    for _ in range(50):
        name = f"{rng.choice(firsts)} {rng.choice(LAST_NAMES)}"
        if name not in used:
            break
    else:  # more users than likely combinations: number the repeats, as RecAgent does
        stem, k = name, 2
        while f"{stem} {k}" in used:
            k += 1
        name = f"{stem} {k}"
    used.add(name)
    return name


def _yaml_entries(path: Path) -> list[tuple[int, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML ({exc})") from exc
    if isinstance(data, Mapping) and set(data) == {"profiles"}:
        data = data["profiles"]
        node = next(v for k, v in node.value if k.value == "profiles")
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of profiles (or a mapping with the single key 'profiles')")
    return [(item.start_mark.line + 1, entry) for item, entry in zip(node.value, data, strict=True)]


def _csv_entries(path: Path) -> list[tuple[int, dict[str, str]]]:
    table = read_table(path, ("name",), sep=",", header=True, quoted=True, bad=BadRows("error"))
    rows = []
    for r, line in enumerate(table.lines):
        entry = {k: v[r] for k, v in table.columns.items() if v[r].strip() or k in ("name",)}
        if "age" in entry:
            entry["age"] = entry["age"].strip()
        rows.append((int(line), entry))
    return rows


def _text(value: Any, key: str, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected text, got {value!r}")
    value = value.strip()
    if required and not value:
        raise ValueError(f"{key}: must not be empty")
    return value


def _int(value: Any, key: str, lo: int, hi: int | None) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{key}: {value} is outside {lo}..{hi if hi is not None else ''}")
    return int(value)


def _unit(value: Any, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected a number in [0, 1], got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{key}: {number} is outside [0, 1]")
    return number


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return split_list(value)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ValueError(f"{key}: expected a list of texts or one text separated by ';', got {value!r}")


def _features(value: Any) -> tuple[str, ...]:
    known = {f.lower(): f for f in BEHAVIOUR_FEATURES}
    names = _strings(value, "features")
    unknown = [n for n in names if n.lower() not in known]
    if unknown:
        raise ValueError(f"features: unknown {unknown} (known: {', '.join(BEHAVIOUR_FEATURES)})")
    chosen = {known[n.lower()] for n in names}
    return tuple(f for f in BEHAVIOUR_FEATURES if f in chosen)


def profiles_from_config(
    data: DataConfig, dataset: Dataset, generate: Callable[[list[str]], list[str]] | None
) -> list[Profile]:
    """Profiles by the configured method (``data.profile_source``): dataset-aligned, handwritten, or LLM-written.

    ``generate`` is the batch text generator used for ``llm`` profiles (unused otherwise).
    """
    rng = np.random.default_rng(data.seed)
    if data.profile_source == "handwritten":
        if not data.profiles_path:
            raise ConfigError("data.profile_source=handwritten needs data.profiles_path")
        loaded = load_profiles(data.profiles_path)
        if len(loaded) < dataset.n_users:
            raise ConfigError(f"{data.profiles_path}: {len(loaded)} profiles for {dataset.n_users} users")
        return loaded[: dataset.n_users]
    if data.profile_source == "llm":
        if generate is None:
            raise ConfigError("data.profile_source=llm needs a language model")
        return generate_profiles(dataset, generate, rng).profiles
    return profiles_from_dataset(dataset, rng)
