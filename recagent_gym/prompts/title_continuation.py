"""Contract of ``templates/title_continuation.txt``: how likely the language model finds each candidate's title as
the next line of the user's own watch list (``user.llm_item_score: continuation``).

Build: the user's ``history_shots`` most recent titles, oldest first, one ``- title`` line each, then an open
``-`` line. Options: each candidate up to its year, ``" Title ("`` for a line ``Title (1995)`` (the `` (`` ends the
title, so a title that merely starts like a likely one does not score as it), ``" title\\n"`` for a line without
a year. The year's digits are not scored: the model reads them off the title alone (they say how well it knows
the film, the same for every user; a remake scores as the film of its title), and they were half the scored
tokens, each a logits row over the 262k-token vocabulary (``docs/findings.md``). One prompt carries every candidate
of a request: the embedded backend evaluates the shared list once and each title after it.
Parse: the log-likelihood of each option (a backend without option scores gives none: every candidate falls back).
Calibration: the mean log-likelihood of the session's negative examples (titles the user never watched, drawn at
random) after the same list is subtracted, so a score says how much more likely than an arbitrary unseen title the
candidate is for this user; without calibration the raw log-likelihood, divided by :data:`SCALE` in both cases.
Fallback: score ``0.0`` (no opinion), counted.

``continuation_pmi`` (pointwise mutual information): each title's log-likelihood after an empty list under the same
header (:func:`build_prior`: the model's prior for the title, its length and how well the model knows it) is
subtracted from its log-likelihood after the user's list, so the score reads what the user's own list adds; the
references are treated the same way, so the calibrated score is how much more the list raises the candidate than
an arbitrary unseen title. Holtzman et al. (2021), "Surface form competition", score multiple-choice options so.

Why: a Yes/No answer after twenty example titles barely carries signal in a small base model (its LLM-only
discrimination is near chance); the likelihood of a title continuing the user's list reads what the model knows
of the titles and of which films go together.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

SCALE = 4.0
"""Nats per unit of score: log-likelihood differences between titles span about -20..+20 nats, the Yes/No score
about -5..+5, so that ``score_llm_weight`` means about the same in both modes."""
FALLBACK_SCORE = 0.0
MODES: tuple[str, ...] = ("continuation", "continuation_pmi")
"""The ``user.llm_item_score`` values this contract scores."""


def reads_the_list(mode: str) -> bool:
    """Whether ``mode`` (``user.llm_item_score``) is one of this contract's."""
    return mode in MODES


def build_shots(titles: Sequence[str]) -> str:
    """The user's list: ``- title`` per line, in the order given (oldest first)."""
    return "\n".join(f"- {title}" for title in titles)


def build(*, name: str, shots: str) -> str:
    return load_template("title_continuation").render(name=name, shots=shots)


def build_prior(*, name: str) -> str:
    """The same header with an empty list: the prompt whose continuation is the model's prior for a title."""
    return build(name=name, shots="").replace("\n\n-", "\n-")


_YEAR = re.compile(r"(.*\S) \(\d{4}\)")
"""A scoring line that ends in its year: ``Title (1995)``."""


def option(candidate: str) -> str:
    """The text scored after the open ``-`` line: the title up to its year's ``(``, or the whole line and its end."""
    dated = _YEAR.fullmatch(candidate)
    return f" {dated.group(1)} (" if dated else f" {candidate}\n"


def parse(choice: Choice) -> list[float] | None:
    """Every option's log-likelihood, or None when the backend gave none (or a non-finite one). The caller checks
    that there is one per option it sent (a choice does not carry its option count)."""
    if choice.scores is None:
        return None
    values = [float(s) for s in choice.scores]
    return values if all(math.isfinite(v) for v in values) else None
