"""Kibitz: estimate the strength of chess and Go players from their moves.

Data flows one way: files → games → positions → features → aggregates → models.
Run ``kibitz --help`` for the commands.
"""

__version__ = "0.1.0"
