"""The round-based RecAgent simulator: activation, rounds, event log, checkpoints, intervention, role play.

Entry points: :func:`recagent_gym.runs.simulator.runner.start` / :func:`~recagent_gym.runs.simulator.runner.resume`
and the ``recagent-gym simulate`` command (:mod:`recagent_gym.runs.commands.simulate`).
"""
