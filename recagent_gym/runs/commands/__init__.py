"""The command line's command groups, one module each (``recagent-gym data|llm|users|simulate|train|evaluate|...``):
each parses its arguments, loads the configuration and calls a run."""
