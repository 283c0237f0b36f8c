"""The query-carrying transformer encoder: PIQN's instance queries ride through a pretrained
BERT / RoBERTa / ELECTRA next to the words (the paper's §3.2 "Encoder").

Every layer sees [words ; queries] with one-way self-attention: words never attend to queries,
so the word stream is exactly the plain model's, and queries attend to the words and
(optionally) to each other. Queries share every pretrained weight with the words. The masked
words→queries block is never computed: the word rows are an ordinary T×T attention and the query
rows an M×(T+M) one. (``one_way=False``, the paper's ablation, lets the words attend to the
queries as well.)
"""

from contextlib import nullcontext
from typing import Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ..errors import Errors
from .common import in_input_order, length_groups

SUPPORTED_MODELS = ("BertModel", "RobertaModel", "ElectraModel")
POOLINGS = ("max", "mean")


class QueryTransformer(nn.Module):
    """A pretrained transformer that also encodes M learnable instance queries.

    hf_model: a loaded ``BertModel``, ``RobertaModel`` or ``ElectraModel`` (the base model,
        not a task head such as ``BertForMaskedLM``). Its weights are used as they are and are
        registered here as ``self.transformer``.
    n_queries: M, the number of instance queries.
    query_interaction: queries attend to each other as well as to the words. False gives the
        "w/o query interaction" setting of the MSRA/CoNLL03/OntoNotes configs.
    common_embedding: add one learned vector shared by all queries (the paper's query type
        embedding U^q) to the query content embeddings.
    query_dropout: dropout after the LayerNorm of the query content and position embeddings.
    one_way: words never attend to queries (PIQN's one-way self-attention), so word states are
        the plain transformer's. False lets words attend to queries too (the paper's "w/o one-way
        SA" ablation: "the original BERT" over words and queries).
    pooling: "max" over each word's subwords (the official code's), or their "mean" (spacy-transformers' usual
        ``reduce_mean``).

    ``freeze_transformer`` (attribute, default False): the pretrained weights get no gradient.
    The query stream uses detached copies of the pretrained weights, so gradients still reach the
    query embeddings through the frozen layers; with one-way attention the word stream cannot
    depend on anything trainable and runs under ``torch.no_grad()``, without it the word stream
    uses detached weights too. Dropout inside the transformer still follows ``train()`` / ``eval()``.
    """

    def __init__(
        self,
        hf_model: nn.Module,
        n_queries: int,
        query_interaction: bool = True,
        common_embedding: bool = True,
        query_dropout: float = 0.1,
        one_way: bool = True,
        pooling: str = "max",
    ):
        super().__init__()
        _check_model(hf_model)
        if pooling not in POOLINGS:
            raise ValueError(Errors.E059.format(pooling=pooling, options=", ".join(POOLINGS)))
        if n_queries < 1:
            raise ValueError(Errors.E033.format(n_queries=n_queries))
        config = hf_model.config
        width = config.hidden_size
        reference = next(hf_model.parameters())
        factory = {"device": reference.device, "dtype": reference.dtype}
        self.transformer = hf_model
        self.n_queries = n_queries
        self.query_interaction = query_interaction
        self.one_way = one_way
        self.pooling = pooling
        self.freeze_transformer = False
        from transformers import RobertaModel

        self._max_length = config.max_position_embeddings
        if isinstance(hf_model, RobertaModel):
            self._max_length -= config.pad_token_id + 1
        self.query_content = nn.Parameter(torch.empty(n_queries, width, **factory))
        if common_embedding:
            self.query_type = nn.Parameter(torch.empty(width, **factory))
        else:
            self.register_parameter("query_type", None)
        self.query_position = nn.Parameter(torch.empty(n_queries, width, **factory))
        self.content_norm = nn.LayerNorm(width, eps=config.layer_norm_eps, **factory)
        self.position_norm = nn.LayerNorm(width, eps=config.layer_norm_eps, **factory)
        self.query_dropout = nn.Dropout(query_dropout)
        for param in (self.query_content, self.query_type, self.query_position):
            if param is not None:
                nn.init.normal_(param, mean=0.0, std=0.02)

    @property
    def width(self) -> int:
        return self.transformer.config.hidden_size

    @property
    def max_length(self) -> int:
        """The longest subword sequence (special tokens included) the model has positions for.
        RoBERTa's positions start after its padding index, so it takes 2 fewer (512, not 514)."""
        return self._max_length

    @property
    def uses_segment_ids(self) -> bool:
        """Whether the model has a second token type, so window words can get type 1."""
        return self.transformer.config.type_vocab_size > 1

    def query_inputs(self, batch_size: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """(content e0, position p), each (batch_size, M, h). Dropout is drawn per window."""
        content = self.query_content
        if self.query_type is not None:
            content = content + self.query_type
        content = self.content_norm(content).expand(batch_size, -1, -1)
        position = self.position_norm(self.query_position).expand(batch_size, -1, -1)
        return self.query_dropout(content), self.query_dropout(position)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: Union[torch.Tensor, None] = None,
        *,
        word_index: torch.Tensor,
        n_words: Union[torch.Tensor, Sequence[int]],
        max_padded: int = 0,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Encode B windows; returns (words (B, n, h), queries (B, M, h)).

        input_ids, attention_mask, token_type_ids: (B, T) as from ``encode_windows``;
            attention_mask marks real subwords (context included).
        word_index, n_words: the pooling spec from ``encode_windows``: word_index[b, t] is the
            window word that subword t belongs to, or -1; n_words[b] the window's word count.
            Each word is the max over its subwords' last-layer states (zeros if it has none).
        max_padded: run the windows in length groups of at most this many padded subwords
            (``length_groups``; 0: one batch), so short windows are not padded to the longest.
            The inputs must be right-padded, as ``encode_windows`` makes them.
        """
        counts = n_words.tolist() if isinstance(n_words, torch.Tensor) else list(n_words)
        lengths = attention_mask.sum(1).tolist()
        groups = length_groups(lengths, max_padded)
        if len(groups) == 1:
            return self._forward(input_ids, attention_mask, token_type_ids, word_index, counts)
        n = max(counts)
        parts = []
        for group in groups:
            rows = torch.tensor(group, device=input_ids.device)
            cut = max(lengths[i] for i in group)
            words, queries = self._forward(
                input_ids[rows, :cut],
                attention_mask[rows, :cut],
                None if token_type_ids is None else token_type_ids[rows, :cut],
                word_index[rows, :cut],
                [counts[i] for i in group],
            )
            parts.append((F.pad(words, (0, 0, 0, n - words.shape[1])), queries))
        words, queries = (in_input_order(list(stream), groups, dim=0) for stream in zip(*parts))
        return words, queries

    def _forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: Union[torch.Tensor, None],
        word_index: torch.Tensor,
        n_words: Sequence[int],
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        batch, length = input_ids.shape
        if length > self.max_length:
            raise ValueError(
                Errors.E034.format(length=length, model=type(self.transformer).__name__, max_length=self.max_length)
            )
        frozen = self.freeze_transformer
        # (B, 1, 1, T): True where a key is a real subword; broadcast over heads and rows.
        key_mask = attention_mask.bool()[:, None, None, :]
        with torch.no_grad() if frozen else nullcontext():
            words = self.transformer.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            if hasattr(self.transformer, "embeddings_project"):  # ELECTRA, embedding_size != h
                words = self.transformer.embeddings_project(words)
        queries, position = self.query_inputs(batch)
        query_keys = key_mask.new_ones((batch, 1, 1, self.n_queries))
        with_queries = torch.cat([key_mask, query_keys], dim=-1)
        query_mask = with_queries if self.query_interaction else key_mask
        word_mask = key_mask if self.one_way else with_queries
        for layer in self.transformer.encoder.layer:
            words, queries = self._layer(layer, words, queries, position, word_mask, query_mask, frozen)
        return pool_words(words, word_index, max(n_words, default=0), self.pooling), queries

    def _layer(self, layer, words, queries, position, word_mask, query_mask, frozen):
        """One transformer layer over words and queries with shared weights: words attend to the words
        (and, unless one_way, to the queries), queries to the words (and, with query_interaction, to
        each other). word_mask / query_mask: the keys each may attend to."""
        attention = layer.attention.self
        heads, head_size = attention.num_attention_heads, attention.attention_head_size
        dropout = attention.dropout.p if attention.training else 0.0
        scale = head_size**-0.5

        def split(x):
            return x.view(x.shape[0], x.shape[1], heads, head_size).transpose(1, 2)

        def merge(x):
            return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], heads * head_size)

        run = _call_detached if frozen else _call
        # Query positions steer where a query looks (Q, K) but are not part of what it carries (V).
        positioned = (queries + position) / 2
        query_q = split(run(attention.query, positioned))
        if self.query_interaction or not self.one_way:
            key_q, value_q = split(run(attention.key, positioned)), split(run(attention.value, queries))
        # Frozen one-way words depend on nothing trainable; two-way words depend on the queries.
        no_graph = frozen and self.one_way
        word_run = _call if no_graph else run
        with torch.no_grad() if no_graph else nullcontext():
            key_w, value_w = split(word_run(attention.key, words)), split(word_run(attention.value, words))
            keys, values = key_w, value_w
            if not self.one_way:
                keys, values = torch.cat([key_w, key_q], dim=2), torch.cat([value_w, value_q], dim=2)
            context = F.scaled_dot_product_attention(
                split(word_run(attention.query, words)),
                keys,
                values,
                attn_mask=word_mask,
                dropout_p=dropout,
                scale=scale,
            )
            hidden = word_run(layer.attention.output, merge(context), words)
            new_words = word_run(layer.output, word_run(layer.intermediate, hidden), hidden)

        keys, values = key_w, value_w
        if self.query_interaction:
            keys, values = torch.cat([key_w, key_q], dim=2), torch.cat([value_w, value_q], dim=2)
        context = F.scaled_dot_product_attention(
            query_q, keys, values, attn_mask=query_mask, dropout_p=dropout, scale=scale
        )
        hidden = run(layer.attention.output, merge(context), queries)
        queries = run(layer.output, run(layer.intermediate, hidden), hidden)
        return new_words, queries


def pool_words(hidden: torch.Tensor, word_index: torch.Tensor, n_words: int, pooling: str = "max") -> torch.Tensor:
    """Max or mean over each word's subwords: (B, T, h) → (B, n, h); words without subwords get zeros.

    One scatter over a flat index (window b, word j → b·n + j; every other subword → a spill row that is
    dropped), so no (B, n, T, h) tensor is built.
    """
    batch, _, width = hidden.shape
    slots = batch * n_words
    offsets = torch.arange(batch, device=hidden.device)[:, None] * n_words
    flat = torch.where(word_index >= 0, word_index + offsets, slots).reshape(-1)
    counts = torch.bincount(flat, minlength=slots + 1)[:slots, None]
    rows = hidden.reshape(-1, width)
    if pooling == "mean":
        sums = hidden.new_zeros((slots + 1, width)).index_add(0, flat, rows)
        return (sums[:slots] / counts.clamp(min=1)).view(batch, n_words, width)
    # Start at the dtype's min (not -1e30, which overflows fp16) so any real value wins.
    pooled = hidden.new_full((slots + 1, width), torch.finfo(hidden.dtype).min)
    pooled = pooled.scatter_reduce(0, flat[:, None].expand(-1, width), rows, "amax", include_self=True)
    pooled = torch.where(counts > 0, pooled[:slots], pooled.new_zeros(()))
    return pooled.view(batch, n_words, width)


def _call(module: nn.Module, *args):
    return module(*args)


def _call_detached(module: nn.Module, *args):
    """Run ``module`` with its parameters detached: gradients flow to the inputs only."""
    params = {name: param.detach() for name, param in module.named_parameters()}
    return functional_call(module, params, args)


def _supported_classes() -> tuple:
    from transformers import BertModel, ElectraModel, RobertaModel

    return (BertModel, RobertaModel, ElectraModel)


def _check_model(hf_model) -> None:
    if not isinstance(hf_model, _supported_classes()):
        raise ValueError(Errors.E035.format(supported=", ".join(SUPPORTED_MODELS), model=type(hf_model).__name__))
    config = hf_model.config
    if getattr(config, "is_decoder", False):
        raise ValueError(Errors.E036.format(model=type(hf_model).__name__))
    position_type = getattr(config, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(Errors.E037.format(position_type=position_type))
