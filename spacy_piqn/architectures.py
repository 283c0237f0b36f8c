"""Registered model builders. Their docstrings document the config arguments."""
from typing import List

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from .layers.piqn_model import PIQNOutput, build_piqn
from .layers.torch_head import build_torch_head
from .windows import GetWindows


@registry.architectures("spacy-piqn.PIQN.v1")
def build_piqn_model(
    tok2vec: Model[List[Doc], List[Floats2d]],
    windows: GetWindows,
    hidden_width: int = 256,
    n_queries: int = 60,
    n_layers: int = 3,
    n_heads: int = 8,
    pointer_width: int = 0,
    lstm_layers: int = 1,
    dropout: float = 0.1,
    query_interaction: bool = True,
    common_embedding: bool = True,
    mixed_precision: bool = False,
) -> Model[List[Doc], PIQNOutput]:
    """PIQN's head on top of any spaCy token encoder.

    tok2vec (Model[List[Doc], List[Floats2d]]): the word encoder: a ``spacy.Tok2Vec.v2``, a
        ``spacy-transformers.TransformerListener.v1`` to a shared transformer, or an embedded
        ``spacy-transformers.Tok2VecTransformer.v3``.
    windows (Callable[[List[Doc]], List[Window]]): how docs are cut into the stretches the head
        predicts on (``spacy-piqn.token_windows.v1``).
    hidden_width (int): width of the BiLSTM output, the word-level layers and the heads.
    n_queries (int): M, the instance queries per window: the most entities one window can hold.
    n_layers (int): L, the word-level one-way transformer layers (each trains its own heads).
    n_heads (int): attention heads of the word-level layers and the classifier.
    pointer_width (int): width of the entity pointer's word-query fusion (0: hidden_width, as in
        PIQN). Its (windows × queries × words × width) tensor dominates the head's cost.
    lstm_layers (int): BiLSTM layers over the words (0: a linear projection instead).
    dropout (float): dropout inside the head (spaCy's [training] dropout does not reach torch).
    query_interaction (bool): whether queries attend to each other.
    common_embedding (bool): add a shared "query type" vector to every query's content.
    mixed_precision (bool): autocast the head on CUDA (ignored on CPU).
    """
    head = build_torch_head(
        width=hidden_width,
        n_queries=n_queries,
        n_layers=n_layers,
        n_heads=n_heads,
        pointer_width=pointer_width,
        lstm_layers=lstm_layers,
        dropout=dropout,
        query_interaction=query_interaction,
        common_embedding=common_embedding,
        mixed_precision=mixed_precision,
    )
    return build_piqn(tok2vec, head, windows)
