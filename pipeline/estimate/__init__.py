"""One player's estimate, shared by ``kibitz estimate`` (``pipeline.jobs.estimate``) and
``kibitz serve`` (``pipeline.serve``, ``actors.serve_app``): the extraction of a few games in
this process (:mod:`pipeline.estimate.in_process`) and the estimate from a player's instance
rows (:mod:`pipeline.estimate.result`)."""
