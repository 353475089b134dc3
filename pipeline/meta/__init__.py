"""Features → aggregates → estimates: DuckDB aggregates, the meta-models of Kuboki et al. (2025)
and their samples, training, tables and figures.
"""
