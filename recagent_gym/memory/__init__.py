"""The agents' memory (RecAgent): sensory, short-term and long-term memory, retrieval, reflection, forgetting.

:class:`~recagent_gym.memory.agent_memory.AgentMemory` is one agent's memory; writing is batched across agents by
:func:`~recagent_gym.memory.writer.flush_memories` (one LLM call per stage), off the critical path.

Import from the modules: this ``__init__`` stays empty so that the configuration section
(:mod:`~recagent_gym.memory.config`) is importable without the memory's code.
"""
