"""Foundations every stage shares: where files live (settings), the games and features table
schemas (with the one rule that names feature columns), the exactly-once chunk store, the
deterministic data split, MLflow tracking, the output home's DuckDB catalog of the SQL models,
the user-error base class and the progress line. Imports nothing else of Kibitz.
"""
