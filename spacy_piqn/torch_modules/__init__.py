"""Plain PyTorch modules (torch only, no spaCy or thinc): the head, the query transformer (queries
inside a pretrained encoder), subword pooling.

``spacy_piqn/layers/`` wraps them as thinc layers for spaCy."""
