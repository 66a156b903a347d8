"""The runs: the layer above the library that alone reads the root configuration (:mod:`.config`) and composes the
library into jobs. The command line (:mod:`.cli`, one module per command group in :mod:`.commands`), building the
env faces from a configuration (:mod:`.make_env`, the registered entry points: :mod:`.env_registration`), the
simulator (:mod:`.simulator`), distillation (:mod:`.distill`), policy training and held-out evaluation
(:mod:`.policies`), the evaluations (:mod:`.evaluation`), the comparisons built on them (:mod:`.comparisons`) and the
dashboard (:mod:`.dashboard`). Nothing below (``recagent_gym.data``, ``llm``, ``prompts``, ``memory``, ``social``,
``recommenders``, ``users``, ``session``, ``envs``, ``policies``) imports from here (``tests/test_layout.py``).
"""
