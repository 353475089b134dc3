"""Go as Kibitz sees it: KataGo's input and policy layout (``spec``), the compiled rules engine
(``rules``), the batch encoder (``encode``), HumanSL metadata rows (``metadata``) and Fox ranks
(``ranks``).
"""
