"""Training Kibitz's own nets (s-score, levels s-score, rank-conditioned Go policy): position
pools, the shared loop, devices, evaluation and model cards.
"""
