"""Issue 28, property-based: every configuration document and every data file either loads or raises the project's
typed error (``ConfigError``, ``DataError``), never another exception and never a hang.

Documents are random nested mappings whose keys are mostly the real section and field names (so values reach the
fields' validators) and whose values are of every type: huge integers, NaN and infinities, unicode text, lists,
nested mappings. They go in as a mapping, as a YAML file and as ``--set`` overrides; raw YAML text goes in too. Data
rows are random CSV rows for the MovieLens-latest and RecAgent-CSV loaders, in both bad-row modes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import DataError, Dataset
from recagent_gym.runs.config import Config, ConfigError, config_from_dict, load_config

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _field_names() -> tuple[list[str], list[str]]:
    sections = list(Config.model_fields)
    fields = sorted({f for name, info in Config.model_fields.items() for f in info.annotation.model_fields})  # type: ignore[union-attr]
    return sections, fields


SECTIONS, FIELDS = _field_names()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["auto", "openai", "embedded", "llm", "mf", "http://", "ftp://x", "", "١٢", "1e999", ".nan"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
section_bodies = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12), values, max_size=6)
documents = st.dictionaries(st.sampled_from(SECTIONS) | st.text(max_size=12), section_bodies | values, max_size=4)


def _loads_or_config_error(load: Any) -> None:
    try:
        assert isinstance(load(), Config)
    except ConfigError as exc:
        assert str(exc).strip()


@FAST
@given(documents)
@pytest.mark.slow
def test_any_mapping_validates_or_is_a_config_error(doc: dict[str, Any]) -> None:
    _loads_or_config_error(lambda: config_from_dict(doc))


@pytest.mark.slow
@FAST
@given(documents)
def test_any_yaml_file_loads_or_is_a_config_error(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        _loads_or_config_error(lambda: load_config(path))


FRAGMENTS = (
    "\n", "  ", ": ", "- ", "[", "]", "{", "}", ", ", "&a ", "*a", "<<: ", "? ", "!!int ", "!!float ", "!!timestamp ",
    "!!binary ", "!!set ", "2001-02-30", "9" * 4400, ".nan", ".inf", "~", "'", '"', "#", "|", ">", "---", "...",
    "llm", "base_url", "simulation", "agents", "x",
)  # fmt: skip
yaml_texts = st.text(max_size=200) | st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)


@FAST
@given(yaml_texts)
def test_any_text_as_a_config_file_loads_or_is_a_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        _loads_or_config_error(lambda: load_config(path))


keys = st.lists(st.sampled_from(SECTIONS + FIELDS) | st.text(max_size=6), min_size=0, max_size=4).map(".".join)
raw_values = yaml_texts | values.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip())


@FAST
@given(st.lists(st.tuples(keys, raw_values).map("=".join) | st.text(max_size=30), max_size=3))
def test_any_overrides_apply_or_are_a_config_error(overrides: list[str]) -> None:
    _loads_or_config_error(lambda: load_config(None, overrides))


# --- data rows --------------------------------------------------------------------------------------------------

cells = st.one_of(
    st.integers(min_value=-5, max_value=12).map(str),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", " 1 ", "١٢", "１", "٤.0", "²", "1_0", "0x10", "4.5", "978300000", '"', '"a,b"', "\\", "nan"]),
    st.text(max_size=12),
)
rows = st.lists(cells, min_size=1, max_size=6).map(lambda cs: ",".join(c.replace("\n", " ") for c in cs))
csv_bodies = st.lists(rows | st.text(max_size=40), max_size=8).map(lambda lines: "\n".join(lines) + "\n")
modes = st.sampled_from(["error", "skip"])


def _loads_or_data_error(folder: Path, mode: str) -> None:
    try:
        assert isinstance(load_dataset(str(folder), on_bad_row=mode), Dataset)  # type: ignore[arg-type]
    except DataError as exc:
        assert str(exc).strip()


@FAST
@given(csv_bodies, csv_bodies, modes)
def test_any_movielens_rows_load_or_are_a_data_error(movies: str, ratings: str, mode: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "movies.csv").write_text("movieId,title,genres\n1,Toy Story (1995),Comedy\n" + movies, "utf-8")
        (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,978300000\n" + ratings, "utf-8")
        _loads_or_data_error(folder, mode)


@pytest.mark.slow
@FAST
@given(csv_bodies, csv_bodies, csv_bodies, modes)
def test_any_recagent_csv_rows_load_or_are_a_data_error(items: str, users: str, inter: str, mode: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "item.csv").write_text("id,title,genre,description\n0,Heat,Crime,x\n" + items, "utf-8")
        (folder / "user.csv").write_text("id,name,age,feature\n0,Ann,30,Watcher\n" + users, "utf-8")
        (folder / "interactions.csv").write_text("user_id,item_id,rating,timestamp\n0,0,5,100\n" + inter, "utf-8")
        _loads_or_data_error(folder, mode)


ascii_cells = {
    "user": ["1", "2", "3", "12"],
    "movie": ["1"],
    "rating": ["0.5", "3", "4.0", "5"],
    "time": ["978300000", "978300001"],
}
other_digits = st.sampled_from(["١٢", "１", "٤.0", "٥", "²", "1_0", "９７８３０００００", "٩٧٨٣٠٠٠٠٠", "٣"])
rating_rows = st.tuples(
    *(st.sampled_from(choices) | other_digits for choices in ascii_cells.values())
)  # userId, movieId, rating, timestamp


@pytest.mark.slow
@FAST
@given(st.lists(rating_rows, min_size=1, max_size=8))
def test_only_ascii_numbers_are_loaded(rows: list[tuple[str, ...]]) -> None:
    """In skip mode, a row with a number in other digits is skipped, never read as a number."""
    plain = sum(all(cell.isascii() and "_" not in cell for cell in row) for row in rows)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "movies.csv").write_text("movieId,title,genres\n1,Toy Story (1995),Comedy\n", "utf-8")
        body = "".join(",".join(row) + "\n" for row in rows)
        (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + body, "utf-8")
        try:
            dataset = load_dataset(str(folder), on_bad_row="skip")
        except DataError:  # every row skipped: no users
            assert plain == 0
            return
    assert len(dataset.interactions) <= plain
    assert dataset.skipped_rows >= len(rows) - plain
