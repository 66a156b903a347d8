"""``python -m recagent_gym``: the ``recagent-gym`` command."""

import sys

from recagent_gym.runs.cli import main

sys.exit(main())
