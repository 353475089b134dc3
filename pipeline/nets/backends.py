"""The inference backends a net can run on, named once for the evaluator, configs and the CLI.

Kept apart from ``pipeline.nets.evaluator`` so that parsing options never imports torch.
"""

BACKENDS = ("torch", "onnx", "tensorrt")
