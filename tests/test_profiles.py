"""Profiles: dataset-aligned, handwritten (YAML/CSV) with validation, LLM-generated with counted fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import BEHAVIOUR_FEATURES, DataError
from recagent_gym.prompts import profile_generation
from recagent_gym.users.dataset_profiles import profiles_from_dataset
from recagent_gym.users.handwritten_profiles import load_profiles
from recagent_gym.users.llm_profiles import generate_profiles
from recagent_gym.users.profiles import Profile
from tests import _data_fixtures as fx


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return load_dataset(str(fx.ml_1m(tmp_path_factory.mktemp("ml1m"))))


def test_dataset_aligned_profiles(dataset):
    profiles = profiles_from_dataset(dataset, np.random.default_rng(0))
    assert [p.user_id for p in profiles] == list(range(dataset.n_users))
    first = profiles[0]
    assert (first.gender, first.age, first.career) == ("female", 15, "K-12 student")
    assert first.interests == dataset.users.loc[0, "interests"] and first.features
    assert set(first.synthesized) == {"name", "traits"}  # ML-1M has gender, age and career
    assert len({p.name for p in profiles}) == len(profiles)
    again = profiles_from_dataset(dataset, np.random.default_rng(0))
    assert [p.to_dict() for p in again] == [p.to_dict() for p in profiles]
    assert Profile.from_dict(first.to_dict()) == first


def test_handwritten_yaml_and_csv(tmp_path):
    yaml_path = fx.write(
        tmp_path / "p.yaml",
        "profiles:\n"
        "  - {name: Ann Lee, gender: female, age: 31, traits: [calm, witty], career: chef,\n"
        "     interests: [Drama], features: [watcher, Poster]}\n"
        "  - id: 7\n    name: Bo\n",
    )
    first, second = load_profiles(yaml_path)
    assert first.user_id == 0 and first.traits == "calm, witty" and first.features == ("Watcher", "Poster")
    assert second.user_id == 7 and second.age == -1 and second.source == "handwritten"
    csv_path = fx.write(
        tmp_path / "p.csv",
        'id,name,gender,age,traits,status,interest,feature\n3,Cy,male,40,"kind, shy",pilot,sci-fi;drama,Critic\n',
    )
    (profile,) = load_profiles(csv_path)
    assert (profile.user_id, profile.career, profile.interests) == (3, "pilot", ("sci-fi", "drama"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {name: A, age: 300}\n", r"p.yaml, profile 1 \(line 1\): age: 300 is outside"),
        ("- {name: A}\n- {name: B, colour: red}\n", r"profile 2 \(line 2\): unknown key 'colour'"),
        ("- {name: A, features: [Dancer]}\n", r"features: unknown \['Dancer'\]"),
        ("- {id: 1, name: A}\n- {id: 1, name: B}\n", r"profile 2 \(line 2\): duplicate user_id 1"),
        ("- {gender: male}\n", r"missing key 'name'"),
        ("name: [unclosed\n", r"not valid YAML"),
    ],
)
def test_handwritten_errors_name_the_place(tmp_path, text, message):
    path = fx.write(tmp_path / "p.yaml", text)
    with pytest.raises(DataError, match=message):
        load_profiles(path)


def test_llm_profiles_parse_and_count_fallbacks(dataset):
    prompts_seen: list[str] = []
    outputs = [
        " Jane Roe\nGender: female\nAge: 29\nTraits: bold, kind\nCareer: architect\n\nName: Next One",
        " 12345\nGender: robot\nAge: old\nTraits: x\nCareer: pilot",
        "",
    ]

    def generate(prompts: list[str]) -> list[str]:
        prompts_seen.extend(prompts)
        return outputs[len(prompts_seen) - len(prompts) : len(prompts_seen)]

    result = generate_profiles(dataset, generate, np.random.default_rng(0), batch_size=2)
    assert len(prompts_seen) == dataset.n_users and prompts_seen[0].rstrip().endswith("Name:")
    jane, partial, empty = result.profiles
    assert (jane.name, jane.age, jane.career, jane.synthesized) == ("Jane Roe", 29, "architect", ())
    assert partial.career == "pilot" and partial.traits == "x" and set(partial.synthesized) == {"name", "gender", "age"}
    base = profiles_from_dataset(dataset, np.random.default_rng(0))
    assert partial.name == base[1].name and empty.name == base[2].name
    assert result.fallback_fields == 3 + 5 and result.fallback_profiles == 1
    assert all(p.source == "llm" and set(p.features) <= set(BEHAVIOUR_FEATURES) for p in result.profiles)
    with pytest.raises(ValueError, match="outputs for"):
        generate_profiles(dataset, lambda ps: [], np.random.default_rng(0))


def test_prompt_contract_render():
    prompt = profile_generation.build(("Drama",), ("Heat",), ("Critic", "Poster"))
    assert "Favourite genres: Drama" in prompt and "criticises" in prompt and "{" not in prompt
