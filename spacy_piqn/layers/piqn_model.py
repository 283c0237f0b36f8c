"""The whole PIQN model as one thinc layer: encoder → windows → head.

Two word encoders: any spaCy tok2vec over whole docs (``build_piqn``), or the query-carrying
transformer, which reads each window with its context and hands the head its query states as
well (``build_piqn_query_transformer``)."""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats4d

from ..errors import Errors
from ..windows import GetWindows, Window
from .torch_head import HeadInput


@dataclass
class PIQNOutput:
    """The head's outputs for every window of a batch: in training the logits of every word-level
    layer, left/right (L, B, M, n) and classes (L, B, M, C); at prediction the last layer's
    probabilities (1, B, M, n) and (1, B, M, C). n counts the words predicted on (context excluded).
    ``tags``: a word tagger's logits in training, its probabilities at prediction (1, B, n, C - 1);
    None without one."""

    windows: List[Window]
    left: Optional[Floats4d]
    right: Optional[Floats4d]
    classes: Optional[Floats4d]
    tags: Optional[Floats4d] = None

    def logits(self) -> Tuple[Floats4d, ...]:
        """The arrays the head returned, in its order (what its backprop takes)."""
        arrays = (self.left, self.right, self.classes)
        return arrays if self.tags is None else arrays + (self.tags,)

    @property
    def lengths(self) -> List[int]:
        return [w.end - w.start for w in self.windows]


def _empty(windows: List[Window]) -> Tuple[PIQNOutput, Callable]:
    return PIQNOutput(windows, None, None, None), lambda d_output: []


def _spans(windows: List[Window]) -> Optional[numpy.ndarray]:
    """(offset, length) of each window's predicted words among the words it reads; None without context."""
    if not any(w.left_context or w.right_context for w in windows):
        return None
    return numpy.asarray([(w.left_context, w.end - w.start) for w in windows], dtype=numpy.int64)


def build_piqn(
    tok2vec: Model[List[Doc], List[Floats2d]], head: Model, get_windows: GetWindows
) -> Model[List[Doc], PIQNOutput]:
    """Run ``tok2vec`` over whole docs (so windows keep their context), cut the token vectors
    into windows (each with the context it reads) and run the head on each window."""
    model: Model[List[Doc], PIQNOutput] = Model(
        "piqn",
        forward,
        init=init,
        layers=[tok2vec, head],
        refs={"tok2vec": tok2vec, "head": head},
        attrs={"get_windows": get_windows},
    )
    if tok2vec.has_dim("nO"):
        head.set_dim("nI", tok2vec.get_dim("nO"))
    return model


def init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    tok2vec, head = model.layers
    tok2vec.initialize(X=X)
    if X is not None and not head.has_dim("nI"):
        vectors = tok2vec.predict([doc for doc in X if len(doc)])
        head.set_dim("nI", vectors[0].shape[1])
    head.initialize()


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[PIQNOutput, Callable]:
    tok2vec, head = model.layers
    windows: List[Window] = model.attrs["get_windows"](docs, is_train=is_train)
    if not windows:
        return _empty(windows)
    vectors, backprop_tok2vec = tok2vec(docs, is_train)
    X = HeadInput([vectors[w.doc][w.read_start : w.read_end] for w in windows], _spans(windows))
    outputs, backprop_head = head(X, is_train)

    def backprop(d_output: PIQNOutput) -> List[Doc]:
        dX = backprop_head(d_output.logits())
        d_vectors = [model.ops.alloc2f(*v.shape) for v in vectors]
        for window, dx in zip(windows, dX.words):
            d_vectors[window.doc][window.read_start : window.read_end] += dx
        return backprop_tok2vec(d_vectors)

    return PIQNOutput(windows, *outputs), backprop


def build_piqn_query_transformer(
    encoder: Model[Tuple[List[Doc], List[Window]], List[Tuple[Floats2d, Floats2d]]],
    head: Model,
    get_windows: GetWindows,
) -> Model[List[Doc], PIQNOutput]:
    """Cut docs into windows, encode each window (with its context) together with the
    instance queries, and run the head on the word vectors and query states."""
    model: Model[List[Doc], PIQNOutput] = Model(
        "piqn",
        forward_query_transformer,
        init=init_query_transformer,
        layers=[encoder, head],
        refs={"encoder": encoder, "head": head},
        attrs={"get_windows": get_windows},
    )
    return model


def init_query_transformer(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    encoder, head = model.layers
    encoder.initialize()
    if not head.has_dim("nI"):
        head.set_dim("nI", encoder.get_dim("nO"))
    head.initialize()


def forward_query_transformer(model: Model, docs: List[Doc], is_train: bool) -> Tuple[PIQNOutput, Callable]:
    encoder, head = model.layers
    windows: List[Window] = model.attrs["get_windows"](docs, is_train=is_train)
    if not windows:
        return _empty(windows)
    # The encoder reads its own context (context_words) around the predicted words.
    if _spans(windows) is not None:
        raise ValueError(Errors.E057)
    states, backprop_encoder = encoder((docs, windows), is_train)
    X = HeadInput([words for words, _ in states], None, [queries for _, queries in states])
    outputs, backprop_head = head(X, is_train)

    def backprop(d_output: PIQNOutput) -> List[Doc]:
        dX = backprop_head(d_output.logits())
        return backprop_encoder(list(zip(dX.words, dX.queries)))

    return PIQNOutput(windows, *outputs), backprop
