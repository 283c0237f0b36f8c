"""thinc layers: the PyTorch modules of ``spacy_piqn/torch_modules/`` wrapped for spaCy (PyTorchWrapper-style
shims, converters, serialization), and the whole PIQN model as one thinc layer."""
