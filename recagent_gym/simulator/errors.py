"""The simulator's own error (checkpoint problems raise :class:`~.checkpoint.CheckpointError`)."""


class SimulationError(RuntimeError):
    """A simulation cannot start or continue (unknown agent, output folder in use, checkpoint mismatch)."""
