"""``recagent-gym evaluate agreement``: does a user model rank recommenders the way real held-out behaviour does?

:mod:`.pools` (temporal split, candidate pools), :mod:`.replay` (the real users as a user model), :mod:`.zoo` (the
recommenders), :mod:`.run` (sessions on every user model), :mod:`.stats` (rank agreement, dose-response),
:mod:`.report` (table, CSV, plot) and :mod:`.command` (the CLI).
"""
