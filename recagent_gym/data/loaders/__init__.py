"""One parser per dataset format; each returns a :class:`~recagent_gym.data.build.Parsed` for ``assemble``."""
