"""Chess as Kibitz sees it: Lc0's input planes and 1858-move policy layout (``spec``), the
batch encoder of whole games (``encode``) and policy decoding (``policy``). Named ``chess_game``
so it never reads like python-chess's ``chess``.
"""
