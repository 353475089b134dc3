"""The inference backends and number formats a net can run in, named once for the evaluator,
configs and the CLI.

Kept apart from ``pipeline.nets.evaluator`` so that parsing options never imports torch.
"""

BACKENDS = ("torch", "onnx", "tensorrt")
# Weights and activations: FP32 anywhere, FP16 on GPUs, bfloat16 on GPUs and on CPUs
# with AVX-512 BF16 or AMX (pipeline.nets.evaluator.runs_natively).
PRECISIONS = ("fp32", "fp16", "bf16")
