"""The drivers of whole runs: ingest, extract (both over Ray, through ``actors/``) and estimate."""
