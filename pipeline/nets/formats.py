"""The registry's net format names, named once for the registry, the loaders and the exporter.

A registry entry's ``format`` says which loader turns its file into a torch module
(``pipeline.nets.loading``); the Kibitz formats are also the ``format`` in a
``model.kibitz.pt`` header (``pipeline.nets.model_export`` writes them, the trainers and model
cards read them). The names live in this module, which imports nothing, so the registry can check
entries and the exporter can write headers without importing any loader.
"""

LC0_FORMAT = "lc0"  # an Lc0 protobuf (.pb.gz): pipeline/nets/lc0_net.py
KATAGO_FORMAT = "katago"  # a KataGo model (.bin.gz): pipeline/nets/katago_net.py
SSCORE_FORMAT = "kibitz-sscore"  # pipeline/nets/sscore_net.py
GO_POLICY_FORMAT = "kibitz-go-policy"  # pipeline/nets/go_rank_policy.py
LEVELS_FORMAT = "kibitz-sscore-levels"  # pipeline/nets/sscore_levels.py: the head only, ONNX of it
# A ``model.kibitz.pt`` of any Kibitz format, told apart by its header (a file given by path).
KIBITZ_FORMAT = "kibitz"
# The formats a model.kibitz.pt header may name.
KIBITZ_FORMATS = (SSCORE_FORMAT, GO_POLICY_FORMAT, LEVELS_FORMAT)
# Every net format a registry entry may name; pipeline.nets.loading has one loader per name.
NET_FORMATS = (LC0_FORMAT, KATAGO_FORMAT, *KIBITZ_FORMATS, KIBITZ_FORMAT)
# A ``kibitz train meta`` output shipped as a registry entry (``pipeline/meta/registered.py``):
# the entry's file is the manifest ``meta_models.json``, which lists every other file's sha256.
# Not a net: ``kibitz estimate`` loads it, no net loader does.
META_FORMAT = "kibitz-meta"
# Every format a registry entry may name.
REGISTRY_FORMATS = (*NET_FORMATS, META_FORMAT)
