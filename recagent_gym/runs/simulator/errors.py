"""The simulator's own error (checkpoint problems raise :class:`~.checkpoint.CheckpointError`)."""

from recagent_gym.errors import RecAgentError


class SimulationError(RecAgentError, RuntimeError):
    """A simulation cannot start or continue (unknown agent, output folder in use, checkpoint mismatch)."""

    label = "simulation error"
