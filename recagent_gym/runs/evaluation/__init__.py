"""The paper's evaluations: discrimination (a, b) with a popularity control and a personalization check
(:mod:`~recagent_gym.runs.evaluation.discrimination`), sequence generation with an LLM judge and objective metrics
(:mod:`~recagent_gym.runs.evaluation.sequence`), efficiency, the social study; their metrics, tables and plots.

Import from the modules: this package's ``__init__`` stays empty so that its configuration section
(:mod:`~recagent_gym.runs.config.evaluation_section`) is importable without the runners.
"""
