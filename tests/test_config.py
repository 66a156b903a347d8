"""Typed configuration: defaults, YAML loading, overrides, and errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from recagent_gym.runs.config import Config, ConfigError, dump_config, load_config
from recagent_gym.runs.config.named import config_names


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_valid() -> None:
    config = load_config()
    assert config.llm.backend == "embedded"
    assert config.env.page_size == 5


def test_yaml_sections_load(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "simulation:\n  agents: 7\n  interval_hours: 2.5\nenv:\n  page_size: 3\n"))
    assert config.simulation.agents == 7
    assert config.simulation.interval_hours == 2.5
    assert config.env.page_size == 3


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "simulation:\n  agnets: 7\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "simulation.agnets" in str(err.value)
    assert "unknown key" in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="simulaton: unknown key"):
        load_config(write(tmp_path, "simulaton:\n  agents: 7\n"))


def test_wrong_type_and_range(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"env\.page_size"):
        load_config(write(tmp_path, "env:\n  page_size: many\n"))
    with pytest.raises(ConfigError, match=r"simulation\.agents"):
        load_config(write(tmp_path, "simulation:\n  agents: 0\n"))
    with pytest.raises(ConfigError, match=r"llm\.backend"):
        load_config(write(tmp_path, "llm:\n  backend: gpt5\n"))


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "env: [unclosed\n"))
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_parse_yaml_values(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "env:\n  page_size: 3\n"),
        [
            "env.page_size=8",
            "llm.backend=openai",
            "llm.model=some-model",
            "llm.base_url=http://127.0.0.1:9/v1",
            "social.enabled=false",
        ],
    )
    assert config.env.page_size == 8
    assert config.llm.backend == "openai"
    assert config.llm.base_url == "http://127.0.0.1:9/v1"
    assert config.social.enabled is False


def test_bad_overrides() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["env.page_size"])
    with pytest.raises(ConfigError, match=r"env\.page_sz: unknown key"):
        load_config(None, ["env.page_sz=3"])
    with pytest.raises(ConfigError, match="not a section"):
        load_config(None, ["env.page_size=3", "env.page_size.x=1"])


def test_every_field_is_documented() -> None:
    def walk(model: type) -> None:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)

    walk(Config)


def test_secrets_are_redacted() -> None:
    config = load_config(None, ["llm.api_keys=[sk-test-secret-1, sk-test-secret-2]"])
    assert config.llm.api_keys[0].get_secret_value() == "sk-test-secret-1"
    text = dump_config(config) + repr(config) + str(config)
    assert "sk-test-secret" not in text


def test_every_shipped_config_loads() -> None:
    names = config_names()
    assert {"quickstart", "simulate_small", "simulate_paper"} <= set(names)
    for name in names:
        load_config(name)


def test_off_and_no_stay_strings(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "llm:\n  cache_mode: off\n"), ["llm.cache_mode=off"])
    assert config.llm.cache_mode == "off"
    assert load_config(None, ["social.enabled=false"]).social.enabled is False
