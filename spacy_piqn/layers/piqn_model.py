"""The whole PIQN model as one thinc layer: encoder → windows → head.

Two word encoders: any spaCy tok2vec over whole docs (``build_piqn``), or the query-carrying
transformer, which reads each window with its context and hands the head its query states as
well (``build_piqn_query_transformer``)."""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d, Floats4d, Ints2d

from ..windows import GetWindows, Window


@dataclass
class PIQNOutput:
    """Head logits for every window of a batch. left/right (L', B, M, n), classes (L', B, M, C);
    L' is every word-level layer in training and the last one at prediction. dense (B, n, 2):
    per-word start/end logits of the dense boundary head ((B, n, 0) or None without one).
    denoise: in training with denoising queries, per window an int array (D, 6) of gold
    (class, left, right) and its noised copy; their logits follow the M queries' (M + max D)."""

    windows: List[Window]
    left: Optional[Floats4d]
    right: Optional[Floats4d]
    classes: Optional[Floats4d]
    dense: Optional[Floats3d] = None
    denoise: Optional[List[Ints2d]] = None

    @property
    def lengths(self) -> List[int]:
        return [w.end - w.start for w in self.windows]


# attrs["denoise"] of a PIQN model during one training update (set by the component): the
# windows → per-window (D, 6) arrays of gold entities and their noised copies.
MakeDenoising = Callable[[List[Window]], List[Ints2d]]


def head_with_denoising(model: Model, head: Model, windows: List[Window], is_train: bool) -> Optional[List[Ints2d]]:
    """The denoising queries of this forward, handed to the head (``attrs["denoise"]``) as
    noised (class, left, right) per window; None outside training or without them."""
    make: Optional[MakeDenoising] = model.attrs.get("denoise")
    denoise = make(windows) if is_train and make is not None else None
    if denoise is not None:
        head.attrs["denoise"] = [d[:, 3:6] for d in denoise]
    return denoise


def build_piqn(
    tok2vec: Model[List[Doc], List[Floats2d]], head: Model, get_windows: GetWindows
) -> Model[List[Doc], PIQNOutput]:
    """Run ``tok2vec`` over whole docs (so windows keep their context), cut the token vectors
    into windows and run the head on each window."""
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
    windows: List[Window] = model.attrs["get_windows"](docs)
    if not windows:
        return PIQNOutput(windows, None, None, None), lambda d_output: []
    vectors, backprop_tok2vec = tok2vec(docs, is_train)
    X = [vectors[w.doc][w.start : w.end] for w in windows]
    denoise = head_with_denoising(model, head, windows, is_train)
    try:
        (left, right, classes, dense), backprop_head = head(X, is_train)
    finally:
        head.attrs.pop("denoise", None)

    def backprop(d_output: PIQNOutput) -> List[Doc]:
        dX = backprop_head((d_output.left, d_output.right, d_output.classes, d_output.dense))
        d_vectors = [model.ops.alloc2f(*v.shape) for v in vectors]
        for window, dx in zip(windows, dX):
            d_vectors[window.doc][window.start : window.end] += dx
        return backprop_tok2vec(d_vectors)

    return PIQNOutput(windows, left, right, classes, dense, denoise), backprop


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
    windows: List[Window] = model.attrs["get_windows"](docs)
    if not windows:
        return PIQNOutput(windows, None, None, None), lambda d_output: []
    states, backprop_encoder = encoder((docs, windows), is_train)
    denoise = head_with_denoising(model, head, windows, is_train)
    try:
        (left, right, classes, dense), backprop_head = head(states, is_train)
    finally:
        head.attrs.pop("denoise", None)

    def backprop(d_output: PIQNOutput) -> List[Doc]:
        d_states = backprop_head((d_output.left, d_output.right, d_output.classes, d_output.dense))
        return backprop_encoder(d_states)

    return PIQNOutput(windows, left, right, classes, dense, denoise), backprop
