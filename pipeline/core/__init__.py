"""Foundations every stage shares: where files live (settings), the games and features table
schemas, the exactly-once chunk store, the deterministic data split and MLflow tracking.
Imports nothing else of Kibitz.
"""
