"""The web dashboard of the simulator: watch and steer a simulation in the browser, or play one of its agents.

``recagent-gym serve --config C`` (:mod:`.commands`) serves :func:`.app.create_app` over a
:class:`.controller.Dashboard` (the simulation in a worker thread) and the plain HTML/JS page in ``static/``
(no external scripts).
"""
