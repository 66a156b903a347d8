"""The composed item text: title, year, genres, description and tags, for datasets with and without descriptions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import Dataset, compose_item_text
from tests._eval_fixtures import movielens_dir, tiny_ml  # noqa: F401


def test_every_part_in_order() -> None:
    text = compose_item_text(title="Toy Story", year=1995, genres=["Animation", "Comedy"],
                             description="A cowboy doll is jealous.", tags="pixar, fun")  # fmt: skip
    assert text == "Toy Story (1995) [Animation, Comedy]: A cowboy doll is jealous. Tags: pixar, fun."


def test_without_description_tags_follow_the_genres() -> None:
    assert compose_item_text(title="Heat", year=1995, genres=["Action"], tags="heist") == (
        "Heat (1995) [Action]: Tags: heist."
    )
    assert compose_item_text(title="Heat", year=-1, genres=["Action"]) == "Heat [Action]"
    assert compose_item_text(title="Heat", genres=[], description=float("nan")) == "Heat []"  # type: ignore[arg-type]


def test_tags_already_in_the_description_are_not_repeated() -> None:
    text = compose_item_text(title="Heat", year=1995, genres=["Action"], description="Viewers tag it: heist.",
                             tags="heist")  # fmt: skip
    assert text.count("heist") == 1


def test_tags_are_capped() -> None:
    tags = ", ".join(f"t{i}" for i in range(30))
    text = compose_item_text(title="X", genres=["Drama"], tags=tags, max_tags=3)
    assert text.endswith("Tags: t0, t1, t2.")


def test_dataset_item_text_uses_it(tiny_ml: Dataset) -> None:  # noqa: F811
    assert tiny_ml.item_text(0) == "Film Number 1 (1970) [" + ", ".join(tiny_ml.items["genres"].iat[0]) + "]"
    items = tiny_ml.items.copy()
    items["tags"] = [""] * len(items)
    items.loc[0, "tags"] = "cult classic, slow"
    tagged = replace(tiny_ml, items=items)
    assert tagged.item_text(0).endswith(": Tags: cult classic, slow.")


@pytest.mark.parametrize("with_tags", [True, False])
def test_movielens_latest_tags_reach_the_text_once(movielens_dir: Path, with_tags: bool) -> None:  # noqa: F811
    if with_tags:
        (movielens_dir / "tags.csv").write_text("userId,movieId,tag,timestamp\n1,1,mind-bending,1000000\n")
    dataset = load_dataset(str(movielens_dir))
    text = dataset.item_text(0)
    assert text.count("mind-bending") == (1 if with_tags else 0)


def test_descriptions_path_reaches_the_item_text(movielens_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """``data.descriptions_path`` attaches a RecAgent items CSV; the description lands in the composed item text."""
    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.runs.config import load_config

    csv = tmp_path / "item.csv"
    csv.write_text('id,title,genre,description\n0,Film Number 1,Drama,"A quiet film about a lighthouse."\n')
    config = load_config(None, [f"data.dataset={movielens_dir}", f"data.descriptions_path={csv}"])
    dataset = load_dataset_from_config(config.data)
    assert dataset.item_text(0).endswith(": A quiet film about a lighthouse.")
    assert dataset.item_text(1) == load_dataset(str(movielens_dir)).item_text(1)
    config = load_config(None, [f"data.dataset={movielens_dir}", f"data.descriptions_path={tmp_path / 'none.csv'}"])
    with pytest.raises(Exception, match=r"none\.csv"):
        load_dataset_from_config(config.data)
