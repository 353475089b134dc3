"""Files → games: streamed PGN and SGF readers, 7z and compressed streams, selection rules and
the per-chunk work of ``kibitz ingest`` (the driver is ``pipeline/jobs/ingest.py``).
"""
