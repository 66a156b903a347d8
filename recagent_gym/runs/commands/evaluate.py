"""``recagent-gym evaluate ...``: the evaluation group; each evaluation adds its subcommand here."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluations: policies, agreement, discrimination, preference, rating, sequence, efficiency, social, "
        "sim2real",
    )
    evaluate_subparsers = parser.add_subparsers(dest="evaluation", required=True)

    from recagent_gym.runs.commands.train import add_evaluate_policies

    add_evaluate_policies(evaluate_subparsers)

    from recagent_gym.runs.commands.agreement import add_evaluate_agreement

    add_evaluate_agreement(evaluate_subparsers)

    from recagent_gym.runs.commands.evaluate_paper import (
        add_evaluate_discrimination,
        add_evaluate_preference,
        add_evaluate_rating,
        add_evaluate_sequence,
    )

    add_evaluate_discrimination(evaluate_subparsers)
    add_evaluate_preference(evaluate_subparsers)
    add_evaluate_rating(evaluate_subparsers)
    add_evaluate_sequence(evaluate_subparsers)

    from recagent_gym.runs.commands.evaluate_paper import add_evaluate_efficiency, add_evaluate_social

    add_evaluate_efficiency(evaluate_subparsers)
    add_evaluate_social(evaluate_subparsers)

    from recagent_gym.runs.commands.sim2real import add_evaluate_sim2real

    add_evaluate_sim2real(evaluate_subparsers)
