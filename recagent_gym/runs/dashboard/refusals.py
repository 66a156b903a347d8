"""The requests the dashboard refuses, each with the HTTP status the API answers with."""

from __future__ import annotations


class DashboardError(Exception):
    """A request the dashboard refuses; ``status`` is the HTTP status the API answers with."""

    status = 400


class Busy(DashboardError):
    status = 409


class NotFound(DashboardError):
    status = 404


class Failed(DashboardError):
    """Something broke while applying a valid request; the simulation was restored from its latest checkpoint."""

    status = 500
