"""Plain PyTorch modules (torch only, no spaCy or thinc): the head, the query-carrying encoder, subword pooling.

``spacy_piqn/layers/`` wraps them as thinc layers for spaCy."""
