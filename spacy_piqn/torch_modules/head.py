"""PIQN's word-level part as plain PyTorch modules (no spaCy or thinc imports).

Words (from any encoder) go through a BiLSTM and L one-way layers together with M instance
queries; per layer an entity pointer scores every word as the left/right boundary of each
query's entity and an entity classifier types it: the paper's §3.2 (after the encoder) and §3.3
"Entity Prediction", with the departures docs/design.md lists ("Where we leave the paper").
"""

from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from ..errors import Errors
from ..settings import DEFAULT_HEAD, HeadSettings
from .common import in_input_order, length_groups, unpacked_bilstm

# Logit given to padded words: sigmoid(-1e4) == 0 in fp32 and fp16, and unlike -inf it never
# produces NaN in BCE or softmax.
PAD_LOGIT = -1e4

# left, right (L', B, M, n) and classes (L', B, M, C): logits of every layer in training,
# probabilities of the last layer at prediction; a head with a word tagger adds its logits in
# training and its probabilities at prediction (1, B, n, C - 1), one per word and label ("None"
# excluded).
HeadOutput = Tuple[torch.Tensor, ...]


def init_weights(module: nn.Module) -> None:
    """BERT-style init for the layers PIQN initializes itself (Linear, Embedding, LayerNorm)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()
    elif isinstance(module, nn.LayerNorm):
        module.weight.data.fill_(1.0)
        module.bias.data.zero_()


class QueryEmbeddings(nn.Module):
    """M learnable instance queries: a content vector (plus an optional shared "query type"
    vector) and a separate position vector that is mixed into attention at every layer.
    Without ``learned_content`` (the queries' content comes from a query-carrying encoder)
    only the positions are learned here."""

    def __init__(
        self, n_queries: int, width: int, dropout: float, common_embedding: bool, learned_content: bool = True
    ):
        super().__init__()
        self.content = nn.Embedding(n_queries, width) if learned_content else None
        self.position = nn.Embedding(n_queries, width)
        self.common = nn.Parameter(torch.zeros(width)) if common_embedding and learned_content else None
        self.content_norm = nn.LayerNorm(width) if learned_content else None
        self.position_norm = nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)

    def forward(self) -> Tuple[Optional[torch.Tensor], torch.Tensor]:
        """(content or None, position), each (M, width)."""
        position = self.dropout(self.position_norm(self.position.weight))
        if self.content is None or self.content_norm is None:
            return None, position
        content = self.content.weight
        if self.common is not None:
            content = content + self.common
        return self.dropout(self.content_norm(content)), position


class OneWayLayer(nn.Module):
    """A transformer layer over [words ; queries] in which words never attend to queries.

    Words and queries share every weight. The word rows are an ordinary n×n self-attention;
    the query rows attend to the words (and, with ``query_interaction``, to all queries), so
    the masked words→queries block is never computed. Query positions enter the queries'
    Q and K as (e + p) / 2 and stay out of V. ``one_way = False`` (the paper's "w/o one-way
    SA" ablation) lets the words attend to the queries too, so queries change the words.
    """

    def __init__(self, width: int, n_heads: int, dropout: float, query_interaction: bool, one_way: bool = True):
        super().__init__()
        if width % n_heads:
            raise ValueError(Errors.E010.format(width=width, n_heads=n_heads))
        self.n_heads = n_heads
        self.query_interaction = query_interaction
        self.one_way = one_way
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.attn_norm = nn.LayerNorm(width)
        self.ffn_in = nn.Linear(width, 4 * width)
        self.ffn_out = nn.Linear(4 * width, width)
        self.ffn_norm = nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = dropout

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        batch, heads, length, dim = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * dim)

    def forward(
        self,
        words: torch.Tensor,
        queries: torch.Tensor,
        position: torch.Tensor,
        word_mask: torch.Tensor,
        query_mask: Optional[torch.Tensor] = None,
        rows: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """query_mask (B, Q, Q): which queries each query may attend to (default: all). rows (B, n'):
        gather index of the word rows to return (default: all). Every word is still a key, but the
        other rows skip their attention query and feed-forward: in the last layer context words
        feed nothing, and at 16 context words a side they are half of a GENIA window's words."""
        p_drop = self.attn_dropout if self.training else 0.0
        k_w, v_w = self._split(self.k(words)), self._split(self.v(words))
        if rows is not None:
            words = gather_words(words, rows)
        n_words = words.shape[1]
        # (B, 1, 1, n): True where a key is a real word.
        key_mask = word_mask[:, None, None, :]
        positioned = (queries + position) / 2
        n_queries = queries.shape[1]
        if self.query_interaction or not self.one_way:
            k_all = torch.cat([k_w, self._split(self.k(positioned))], dim=2)
            v_all = torch.cat([v_w, self._split(self.v(queries))], dim=2)
            # (B, 1, 1, n + M): every query is a key.
            all_keys = torch.cat([key_mask, key_mask.new_ones(key_mask.shape[:-1] + (n_queries,))], dim=-1)
        if self.one_way:
            word_keys, word_values, word_key_mask = k_w, v_w, key_mask
        else:
            word_keys, word_values, word_key_mask = k_all, v_all, all_keys
        word_ctx = F.scaled_dot_product_attention(
            self._split(self.q(words)), word_keys, word_values, attn_mask=word_key_mask, dropout_p=p_drop
        )
        q_e = self._split(self.q(positioned))
        if self.query_interaction:
            if query_mask is None:
                query_mask = all_keys
            else:
                query_mask = torch.cat([key_mask.expand(-1, -1, n_queries, -1), query_mask[:, None]], dim=-1)
            query_keys, query_values = k_all, v_all
        else:
            query_keys, query_values, query_mask = k_w, v_w, key_mask
        query_ctx = F.scaled_dot_product_attention(
            q_e, query_keys, query_values, attn_mask=query_mask, dropout_p=p_drop
        )
        # Position-wise parts run once over both streams (same weights).
        hidden = torch.cat([words, queries], dim=1)
        ctx = torch.cat([self._merge(word_ctx), self._merge(query_ctx)], dim=1)
        hidden = self.attn_norm(hidden + self.dropout(self.out(ctx)))
        ffn = self.ffn_out(self.dropout(F.gelu(self.ffn_in(hidden))))
        hidden = self.ffn_norm(hidden + self.dropout(ffn))
        return hidden[:, :n_words], hidden[:, n_words:]


def anchor_prior(word_mask: torch.Tensor, n_queries: int, strength: float) -> torch.Tensor:
    """Pointer-logit bias (B, M, n) that points query i of M at relative position (i + 0.5) / M
    of its window: −strength · (relative word position − anchor)².

    Fresh queries are interchangeable, and matching on their near-identical predictions lets them
    collapse onto "the average entity"; a fixed anchor per query breaks the tie from the first
    update (pretrained BERT attention over absolute positions does this in the official code)."""
    lengths = word_mask.sum(-1, keepdim=True).clamp(min=1).to(torch.float32)
    positions = (torch.arange(word_mask.shape[1], device=word_mask.device) + 0.5) / lengths
    anchors = (torch.arange(n_queries, device=word_mask.device) + 0.5) / n_queries
    return -strength * (positions[:, None, :] - anchors[None, :, None]) ** 2


# The pointer types decide two things, both here: how boundary logits become probabilities (for the
# classifier, the matching cost and the predictions) and how they are trained (``boundary_loss``).


def boundary_probs(logits: torch.Tensor, pointer: str) -> torch.Tensor:
    """Boundary probabilities over the words: a distribution per query ("softmax") or an
    independent probability per word ("sigmoid", PIQN's). Padded words get 0 either way."""
    return torch.softmax(logits, -1) if pointer == "softmax" else torch.sigmoid(logits)


def boundary_loss(logits: torch.Tensor, target: torch.Tensor, word_mask: torch.Tensor, pointer: str) -> torch.Tensor:
    """Summed loss of matched queries' boundary logits (Q, n) against target word indices (Q,):
    cross-entropy over the real words ("softmax"), or binary cross-entropy per real word against
    the one-hot target ("sigmoid", PIQN's). word_mask (Q, n) marks the real words."""
    logits = logits.float()
    if pointer == "softmax":
        # Padded words take no probability mass (and get no gradient).
        return F.cross_entropy(logits.masked_fill(~word_mask, PAD_LOGIT), target, reduction="sum")
    onehot = F.one_hot(target, logits.shape[-1]).float()
    bce = F.binary_cross_entropy_with_logits(logits, onehot, reduction="none")
    return (bce * word_mask).sum()


class EntityPointer(nn.Module):
    """Boundary logits of every query's entity over the words, plus a fixed bias per query and
    word (the anchor prior, computed once per forward by the head). "additive" fusion is PIQN's:
    ReLU(W_w·word + W_q·query) scored by a linear layer; "bilinear" scores (W_q·query)·(W_w·word) and never builds the
    (B, M, n, fusion_width) tensor, the additive pointer's largest cost."""

    def __init__(self, width: int, fusion_width: int, fusion: str = "additive"):
        super().__init__()
        self.word_proj = nn.Linear(width, fusion_width)
        self.query_proj = nn.Linear(width, fusion_width)
        self.score = nn.Linear(fusion_width, 1) if fusion == "additive" else None
        self.scale = fusion_width**-0.5

    def forward(
        self, words: torch.Tensor, queries: torch.Tensor, word_mask: torch.Tensor, prior: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        if self.score is not None:
            fused = F.relu(self.word_proj(words)[:, None, :, :] + self.query_proj(queries)[:, :, None, :])
            logits = self.score(fused).squeeze(-1)
        else:
            logits = self.query_proj(queries) @ self.word_proj(words).transpose(1, 2) * self.scale
        if prior is not None:
            logits = logits + prior.to(logits.dtype)
        return logits.masked_fill(~word_mask[:, None, :], PAD_LOGIT)


class EntityClassifier(nn.Module):
    """Types each query's entity from the query, a query→word cross-attention and the
    boundary-weighted sums of the words (index 0 is the "None" class)."""

    def __init__(self, width: int, n_heads: int, n_classes: int, dropout: float, cls_dropout: float, pointer: str):
        super().__init__()
        self.pointer = pointer
        self.query_proj = nn.Linear(width, width)
        self.cross = nn.MultiheadAttention(width, n_heads, dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(cls_dropout)
        self.out = nn.Linear(3 * width, n_classes)

    def forward(
        self,
        words: torch.Tensor,
        queries: torch.Tensor,
        word_mask: torch.Tensor,
        left_logits: torch.Tensor,
        right_logits: torch.Tensor,
    ) -> torch.Tensor:
        q = self.query_proj(F.relu(queries))
        attended, _ = self.cross(q, words, words, key_padding_mask=~word_mask, need_weights=False)
        q = q + attended
        left = boundary_probs(left_logits, self.pointer) @ words
        right = boundary_probs(right_logits, self.pointer) @ words
        return self.out(F.relu(self.dropout(torch.cat([q, left, right], dim=-1))))


class PIQNHead(nn.Module):
    """BiLSTM → L one-way query layers → (pointer, classifier) per layer.

    forward takes one (n_i, n_in) tensor per window and returns the outputs of the layers that ran:
    left/right (L', B, M, n) and class (L', B, M, C). Training asks for logits of every layer
    (PIQN's auxiliary losses); prediction gets probabilities of the last layer only. A window may
    carry context (``spans``): all its words go through the BiLSTM and the word-level layers, but
    the pointer and the classifier only see the words to predict on, so n counts those. Windows run
    in length groups of at most ``max_padded_words`` padded words (``length_groups``); the outputs
    come back in input order, padded to the longest window.
    """

    def __init__(self, n_in: int, n_classes: int, settings: HeadSettings = DEFAULT_HEAD, query_in: int = 0):
        super().__init__()
        s = settings
        self.max_padded_words = s.max_padded_words
        self.n_queries = s.n_queries
        self.pointer = s.pointer
        if s.lstm_layers > 0:
            self.lstm: Optional[nn.LSTM] = nn.LSTM(
                n_in,
                s.width // 2,
                num_layers=s.lstm_layers,
                bidirectional=True,
                batch_first=True,
                dropout=0.5 if s.lstm_layers > 1 else 0.0,
            )
            self.proj: Optional[nn.Linear] = None
        else:
            self.lstm = None
            self.proj = nn.Linear(n_in, s.width)
        self.queries = QueryEmbeddings(
            s.n_queries, s.width, s.dropout, s.common_embedding, learned_content=not query_in
        )
        # Query states handed over by a query-carrying encoder replace the learned content.
        self.query_in = nn.Linear(query_in, s.width) if query_in else None
        self.layers = nn.ModuleList(
            OneWayLayer(s.width, s.n_heads, s.dropout, s.query_interaction, s.one_way) for _ in range(s.n_layers)
        )
        self.anchor_strength = s.anchor_strength
        self.left = EntityPointer(s.width, s.pointer_width or s.width, s.pointer_fusion)
        self.right = EntityPointer(s.width, s.pointer_width or s.width, s.pointer_fusion)
        self.classifier = EntityClassifier(s.width, s.n_heads, n_classes, s.dropout, s.classifier_dropout, s.pointer)
        self.tagger = nn.Linear(s.width, n_classes - 1) if s.word_tagger else None
        for module in self.modules():
            if not isinstance(module, (nn.LSTM, nn.MultiheadAttention)):
                init_weights(module)

    def encode_words(self, windows: List[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pad the windows and run the BiLSTM so that padding never leaks in (packed on a GPU;
        ``unpacked_bilstm`` on the CPU, where packing is slow to train)."""
        lengths = torch.tensor([len(w) for w in windows])
        padded = pad_sequence(windows, batch_first=True)
        mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
        if self.lstm is not None and padded.device.type == "cpu":
            words = unpacked_bilstm(self.lstm, padded, lengths)
        elif self.lstm is not None:
            # cuDNN runs packed sequences fused.
            packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.lstm(packed)
            words, _ = pad_packed_sequence(out, batch_first=True, total_length=padded.shape[1])
        else:
            words = self.proj(padded)
        return words, mask.to(words.device)

    def forward(
        self,
        windows: List[torch.Tensor],
        spans: Optional[torch.Tensor] = None,
        queries: Optional[List[torch.Tensor]] = None,
        all_layers: bool = False,
    ) -> HeadOutput:
        """spans: a long tensor (B, 2), per window the offset and the number of its words to predict on
        (the others are context); None: all of them. all_layers: logits of every layer (training)
        instead of probabilities of the last one."""
        groups = length_groups([len(w) for w in windows], self.max_padded_words)
        if len(groups) == 1:
            return self._forward(windows, spans, queries, all_layers)
        n_words = int(spans[:, 1].max()) if spans is not None else max(len(w) for w in windows)
        pad_value = PAD_LOGIT if all_layers else 0.0
        parts = []
        for group in groups:
            left, right, classes, *tags = self._forward(
                [windows[i] for i in group],
                None if spans is None else spans[group],
                None if queries is None else [queries[i] for i in group],
                all_layers,
            )
            pad = (0, n_words - left.shape[-1])
            padded = [F.pad(left, pad, value=pad_value), F.pad(right, pad, value=pad_value), classes]
            # Tags (1, B, n, labels): padded words along dim 2; the loss masks them.
            padded += [F.pad(t, (0, 0, 0, n_words - t.shape[2])) for t in tags]
            parts.append(tuple(padded))
        return tuple(in_input_order(list(stream), groups, dim=1) for stream in zip(*parts))

    def _forward(
        self,
        windows: List[torch.Tensor],
        spans: Optional[torch.Tensor],
        queries: Optional[List[torch.Tensor]],
        all_layers: bool,
    ) -> HeadOutput:
        words, mask = self.encode_words(windows)
        target_index, target_mask = predicted_words(spans, mask)
        content, position = self.queries()
        if self.query_in is not None:
            if queries is None:
                raise ValueError(Errors.E038.format(query_in=self.query_in.in_features))
            state = self.query_in(torch.stack(queries))
        else:
            assert content is not None  # learned whenever there is no query_in
            state = content.unsqueeze(0).expand(words.shape[0], -1, -1)
        # The same for every layer and both pointers.
        prior = anchor_prior(target_mask, self.n_queries, self.anchor_strength) if self.anchor_strength else None
        lefts, rights, classes = [], [], []
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            # The last layer returns only the words to predict on: its context rows would feed nothing.
            words, state = layer(words, state, position, mask, rows=target_index if last else None)
            if all_layers or last:
                targets = words if target_index is None or last else gather_words(words, target_index)
                left = self.left(targets, state, target_mask, prior)
                right = self.right(targets, state, target_mask, prior)
                lefts.append(left)
                rights.append(right)
                classes.append(self.classifier(targets, state, target_mask, left, right))
        left, right, logits = torch.stack(lefts), torch.stack(rights), torch.stack(classes)
        # ``targets``: the last layer's words to predict on.
        tags = () if self.tagger is None else (self.tagger(targets).unsqueeze(0),)
        if all_layers:
            return (left, right, logits, *tags)
        probs = boundary_probs(left, self.pointer), boundary_probs(right, self.pointer), torch.softmax(logits, -1)
        # Decoding reads the tagger's probabilities to check each query's boundaries.
        return (*probs, *(torch.sigmoid(t) for t in tags))


def predicted_words(spans: Optional[torch.Tensor], mask: torch.Tensor) -> Tuple[Optional[torch.Tensor], torch.Tensor]:
    """Gather index (B, n) of the words to predict on and their mask, from ``spans`` (B, 2) of
    (offset, length) into windows whose real words ``mask`` (B, n_read) marks; (None, mask) when
    every window predicts on all its words."""
    if spans is None:
        return None, mask
    spans = spans.to(mask.device)
    n_words = int(spans[:, 1].max())
    positions = torch.arange(n_words, device=mask.device)[None, :]
    target_mask = positions < spans[:, 1:2]
    # Padded positions point at the window's first predicted word; the mask hides them.
    index = spans[:, 0:1] + positions.masked_fill(~target_mask, 0)
    return index, target_mask


def gather_words(words: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` (B, n) of ``words`` (B, n_read, w)."""
    return words.gather(1, index[:, :, None].expand(-1, -1, words.shape[-1]))
