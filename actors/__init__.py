"""Ray actors and tasks: the only place where Kibitz decides what runs where.

Each actor wraps a plain step class from ``pipeline`` (which never imports ray), so the
step is testable without a cluster and the distribution decisions stay readable here.
"""
