"""The session kernel, free of gymnasium: open sessions, the one page-step pipeline, who comes next, the shared
social round and the batched end-of-session writes. The env, the vector env, the simulator and the evaluations
are faces of it (see :mod:`recagent_gym.session.kernel`)."""

from recagent_gym.session.kernel import SessionKernel, SessionRules, StartedSession
from recagent_gym.session.observation import observe
from recagent_gym.session.outcome import StepOutcome, StepResult
from recagent_gym.session.state import RESPONSE_CODES, RecommenderSession, SessionStream
from recagent_gym.session.tables import SessionTables

__all__ = [
    "RESPONSE_CODES",
    "RecommenderSession",
    "SessionKernel",
    "SessionRules",
    "SessionStream",
    "SessionTables",
    "StartedSession",
    "StepOutcome",
    "StepResult",
    "observe",
]
