"""Contracts of the memory prompts: build, parse, validate, fallback."""

from __future__ import annotations

import pytest

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts import memory_importance, memory_insight, memory_reflection, memory_sensory
from recagent_gym.prompts.memory_common import (
    REMINDER,
    clean_line,
    echoes_prompt,
    first_sentence,
    invented_names,
)

OBS = "Ann browsed the recommendations and watched Alien (1979), a horror film. She rated it 5 of 5."


def test_sensory_prompt_ends_in_the_answer_slot_and_reasks_with_a_reminder():
    prompt = memory_sensory.build(OBS)
    assert prompt.endswith("Sentence:") and OBS in prompt and REMINDER.strip() not in prompt
    assert REMINDER.strip() in memory_sensory.build(OBS, retry=True)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (" Ann watched the horror film Alien and loved it.\nObservation: x", None),
        ("   ", "empty"),
        (OBS + " More.", "longer than the observation"),
        ("Anna watched the crime movie Heat and liked its tension.", "echoes the prompt"),
        ("Each observation is rewritten as one short sentence", "echoes the prompt"),
    ],
)
def test_sensory_validation(answer: str, problem: str | None):
    sentence = memory_sensory.parse(answer)
    assert "\n" not in sentence
    got = memory_sensory.validate(sentence, OBS, 200)
    assert got == problem if problem is None else problem in (got or "")


def test_sensory_validation_caps_length_and_fallback_is_the_first_sentence():
    assert memory_sensory.validate("Ann watched Alien.", OBS, 10) == "longer than 10 characters"
    first = "Ann browsed the recommendations and watched Alien (1979), a horror film."
    assert memory_sensory.fallback(OBS, 200) == first
    short = memory_sensory.fallback(OBS, 30)
    assert len(short) <= 30 and short.endswith("...") and OBS.startswith(short[:-3])


def test_clean_line_strips_markers_labels_and_quotes():
    assert clean_line('  2. "Ann likes horror."  ') == "Ann likes horror."
    assert clean_line("Sentence: Ann   likes horror.") == "Ann likes horror."
    assert clean_line("- Insight: Ann likes horror.") == "Insight: Ann likes horror."  # one marker only
    assert clean_line("1995 was a good year.") == "1995 was a good year."


def test_invented_titles_names_and_numbers_are_caught():
    assert invented_names("Ann watched Alien (1979) twice.", [OBS]) == []
    assert invented_names("She loved Aliens (1986) and Ripley's story.", [OBS]) == ["Aliens", "1986", "Ripley's"]
    assert invented_names("The film was scary.", [OBS]) == []  # a common sentence starter
    assert invented_names("Bob took Ann to Alien.", [OBS]) == ["Bob"]
    assert memory_sensory.validate("Ann watched Red Dead (1995).", OBS, 200) == (
        "names what the observation does not: Red, Dead, 1995"
    )


def test_first_sentence_handles_text_without_a_stop():
    assert first_sentence("no full stop here", 100) == "no full stop here"


def test_importance_options_prompt_and_normalisation():
    assert memory_importance.options(5) == ("1", "2", "3", "4", "5")
    prompt = memory_importance.build("Ann", "Ann loved Alien.", 5)
    assert prompt.endswith(": ") and "Ann loved Alien." in prompt and "1 to 5" in prompt
    assert memory_importance.parse(Choice(index=0, option="1"), 5) == 0.0
    assert memory_importance.parse(Choice(index=4, option="5"), 5) == 1.0
    assert memory_importance.parse(Choice(index=2, option="3", scores=(0, 0, 1, 0, 0)), 5) == 0.5
    calibrated = Choice(index=4, option="5", scores=(-3.0, -3.0, -2.0, -1.0, -0.5))
    assert memory_importance.parse(calibrated, 5, baseline=(-3.0, -3.0, -3.0, -3.0, -0.1)) == 0.75
    assert memory_importance.parse(calibrated, 5, baseline=(0.0, 0.0)) == 1.0  # mismatched baseline is ignored
    assert "N/A" in memory_importance.calibration_prompt("someone", 5)


def test_insight_contract():
    memories = ["Ann watched Alien.", "Ann watched The Thing."]
    prompt = memory_insight.build("Ann", memories)
    assert prompt.endswith("Insight:") and "- Ann watched Alien." in prompt
    assert memory_insight.parse(" Ann is drawn to horror films.\nMore") == "Ann is drawn to horror films."
    assert memory_insight.validate("Ann is drawn to horror films.", memories, 240) is None
    assert memory_insight.validate("ann watched alien", memories, 240) == "copies a memory"
    assert memory_insight.validate("", memories, 240) == "empty"
    assert memory_insight.validate("Ann likes films " * 5, memories, 40) == "longer than 40 characters"
    assert memory_insight.validate("Ann's movie tastes are:", memories, 240) == "not a statement"
    assert memory_insight.validate("Horror.", memories, 240) == "not a statement"
    assert memory_insight.validate("Ann loves Sherlock Holmes.", memories, 240) == (
        "names what the memories do not: Sherlock, Holmes"
    )
    assert memory_insight.validate("Bob's friend Ann watched horror.", memories, 240, "Bob") is None
    assert memory_insight.validate("I have a strong taste for wood.", memories, 240, "Ann") == "not about the agent"
    assert memory_insight.validate("She likes wood painting.", memories, 240, "Ann") == (
        "shares no word with the memories"
    )
    assert memory_insight.validate("Ann's taste: she watched horror.", memories, 240, "Ann") is None
    assert memory_insight.validate("One high-level insight about Ann's tastes", memories, 240) == "echoes the prompt"
    assert memory_insight.fallback() is None


def test_reflection_contract_keeps_valid_distinct_insights_up_to_count():
    memories = ["Ann watched Alien.", "Ann skipped a comedy."]
    prompt = memory_reflection.build("Ann", memories, 2)
    assert prompt.endswith("1.") and "2 high-level insights" in prompt
    answer = " Ann prefers horror.\n2. Ann watched Alien.\n3. ann prefers horror.\n4. Ann avoids comedies.\n5. Ann x"
    parsed = memory_reflection.parse(answer)
    assert parsed[0] == "Ann prefers horror." and parsed[1] == "Ann watched Alien."
    assert memory_reflection.valid_insights(parsed, memories, 2, 240) == ["Ann prefers horror.", "Ann avoids comedies."]
    assert memory_reflection.valid_insights(["Ann watched Alien."], memories, 2, 240) == []
    assert memory_reflection.fallback() == []


def test_echo_detection_spares_wording_that_comes_from_the_input():
    observation = "Ben chose Heat (1995) and rated it 4 out of 5 on Friday."
    # shares " heat (1995) and rated it 4 out of 5" with the few-shot example, but so does the observation
    assert memory_sensory.validate("Ben chose Heat (1995) and rated it 4 out of 5.", observation, 200) is None
    assert echoes_prompt("Anna chose Heat (1995) and rated it 4 out of 5", "memory_sensory")


def test_echo_detection_ignores_short_or_unrelated_answers():
    assert not echoes_prompt("Ann liked it.", "memory_sensory")
    assert not echoes_prompt("Ann watched the horror film Alien twice this week.", "memory_sensory")
    assert echoes_prompt("(Answer with one new sentence; do not copy the text above.)", "memory_insight")
