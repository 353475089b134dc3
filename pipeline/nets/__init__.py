"""The nets and engines that evaluate positions: weight loaders (Lc0, KataGo, Kibitz's own),
the model registry, evaluator backends (PyTorch, ONNX Runtime, TensorRT), the net bank of an
extraction run, policy statistics and Stockfish.
"""
