"""Outcome-based rating systems (Elo, Glicko-2, TrueSkill, TrueSkill Through Time), their tuning
and skill depth, replayed over the games table.
"""
