"""Builders of older config versions, kept so that pipelines and configs written for them still load.

``spacy-piqn.PIQN.v1`` and ``spacy-piqn.PIQNQueryTransformer.v1`` took the head's settings as their own
arguments; the v2 builders (``architectures.py``) take a ``spacy-piqn.PIQNHead.v1`` block instead. A v1
model is exactly the v2 model with the same head settings.
"""

from typing import List, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from .architectures import build_piqn_head, build_piqn_model, build_piqn_query_transformer_model
from .layers.piqn_model import PIQNOutput
from .settings import DEFAULT_HEAD as D
from .windows import GetWindows, Window


@registry.architectures("spacy-piqn.PIQN.v1")
def build_piqn_model_v1(
    tok2vec: Model[List[Doc], List[Floats2d]],
    windows: GetWindows,
    hidden_width: int = D.width,
    n_queries: int = D.n_queries,
    n_layers: int = D.n_layers,
    n_heads: int = D.n_heads,
    pointer: str = D.pointer,
    anchor_strength: float = D.anchor_strength,
    pointer_fusion: str = D.pointer_fusion,
    pointer_width: int = D.pointer_width,
    lstm_layers: int = D.lstm_layers,
    dropout: float = D.dropout,
    classifier_dropout: float = D.classifier_dropout,
    query_interaction: bool = D.query_interaction,
    common_embedding: bool = D.common_embedding,
    mixed_precision: bool = False,
    head_lr_scale: float = 1.0,
    max_padded_words: int = D.max_padded_words,
) -> Model[List[Doc], PIQNOutput]:
    """``spacy-piqn.PIQN.v2`` with a ``spacy-piqn.PIQNHead.v1`` of these settings (``head_lr_scale`` is
    the head's ``lr_scale``)."""
    head = build_piqn_head(
        hidden_width=hidden_width, n_queries=n_queries, n_layers=n_layers, n_heads=n_heads, pointer=pointer,
        anchor_strength=anchor_strength, pointer_fusion=pointer_fusion, pointer_width=pointer_width,
        lstm_layers=lstm_layers, dropout=dropout, classifier_dropout=classifier_dropout,
        query_interaction=query_interaction, common_embedding=common_embedding, max_padded_words=max_padded_words,
        mixed_precision=mixed_precision, lr_scale=head_lr_scale,
    )  # fmt: skip
    return build_piqn_model(tok2vec, windows, head)


@registry.architectures("spacy-piqn.PIQNQueryTransformer.v1")
def build_piqn_query_transformer_model_v1(
    encoder: Model[Tuple[List[Doc], List[Window]], List[Tuple[Floats2d, Floats2d]]],
    windows: GetWindows,
    hidden_width: int = D.width,
    n_layers: int = D.n_layers,
    n_heads: int = D.n_heads,
    pointer: str = D.pointer,
    anchor_strength: float = D.anchor_strength,
    pointer_fusion: str = D.pointer_fusion,
    pointer_width: int = D.pointer_width,
    lstm_layers: int = D.lstm_layers,
    dropout: float = D.dropout,
    classifier_dropout: float = D.classifier_dropout,
    query_interaction: bool = D.query_interaction,
    mixed_precision: bool = False,
    head_lr_scale: float = 1.0,
    max_padded_words: int = D.max_padded_words,
) -> Model[List[Doc], PIQNOutput]:
    """``spacy-piqn.PIQNQueryTransformer.v2`` with a ``spacy-piqn.PIQNHead.v1`` of these settings and the
    encoder's n_queries."""
    head = build_piqn_head(
        hidden_width=hidden_width, n_queries=encoder.attrs["n_queries"], n_layers=n_layers, n_heads=n_heads,
        pointer=pointer, anchor_strength=anchor_strength, pointer_fusion=pointer_fusion, pointer_width=pointer_width,
        lstm_layers=lstm_layers, dropout=dropout, classifier_dropout=classifier_dropout,
        query_interaction=query_interaction, common_embedding=False, max_padded_words=max_padded_words,
        mixed_precision=mixed_precision, lr_scale=head_lr_scale,
    )  # fmt: skip
    return build_piqn_query_transformer_model(encoder, windows, head)
