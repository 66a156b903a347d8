"""The kernel's per-dataset arrays under the env's name (``env.tables``; see :mod:`recagent_gym.session.tables`)."""

from recagent_gym.session.tables import SessionTables as EnvTables

__all__ = ["EnvTables"]
