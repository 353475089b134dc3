"""Positions → features: the per-game-kind extraction steps (encode, nets, positions after
moves, assembly) that Ray actors and ``kibitz estimate`` call, and the extraction config.
"""
