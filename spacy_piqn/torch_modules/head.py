"""PIQN's word-level part as plain PyTorch modules (no spaCy or thinc imports).

Words (from any encoder) go through a BiLSTM and L one-way layers together with M instance
queries; per layer an entity pointer scores every word as the left/right boundary of each
query's entity and an entity classifier types it: the paper's §3.2 (after the encoder) and §3.3
"Entity Prediction", with the departures README.md lists ("Where we leave the paper").
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

# left, right (L', B, M, n), classes (L', B, M, C), dense boundary logits (B, n, 2 or 0).
HeadOutput = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


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
    Q and K as (e + p) / 2 and stay out of V.
    """

    def __init__(self, width: int, n_heads: int, dropout: float, query_interaction: bool):
        super().__init__()
        if width % n_heads:
            raise ValueError(Errors.E010.format(width=width, n_heads=n_heads))
        self.n_heads = n_heads
        self.query_interaction = query_interaction
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
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """query_mask (B, Q, Q): which queries each query may attend to (default: all)."""
        n_words = words.shape[1]
        p_drop = self.attn_dropout if self.training else 0.0
        k_w, v_w = self._split(self.k(words)), self._split(self.v(words))
        # (B, 1, 1, n): True where a key is a real word.
        key_mask = word_mask[:, None, None, :]
        word_ctx = F.scaled_dot_product_attention(
            self._split(self.q(words)), k_w, v_w, attn_mask=key_mask, dropout_p=p_drop
        )
        positioned = (queries + position) / 2
        q_e = self._split(self.q(positioned))
        if self.query_interaction:
            k_all = torch.cat([k_w, self._split(self.k(positioned))], dim=2)
            v_all = torch.cat([v_w, self._split(self.v(queries))], dim=2)
            n_queries = queries.shape[1]
            if query_mask is None:
                query_keys = key_mask.new_ones(key_mask.shape[:-1] + (n_queries,))
                query_mask = torch.cat([key_mask, query_keys], dim=-1)
            else:
                query_mask = torch.cat([key_mask.expand(-1, -1, n_queries, -1), query_mask[:, None]], dim=-1)
        else:
            k_all, v_all, query_mask = k_w, v_w, key_mask
        query_ctx = F.scaled_dot_product_attention(q_e, k_all, v_all, attn_mask=query_mask, dropout_p=p_drop)
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


# Longest span (in words) a proposal may cover: longer gold entities are still reachable, the
# proposal only sets where a query starts looking.
MAX_PROPOSAL_WIDTH = 24


def top_spans(dense: torch.Tensor, word_mask: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """k proposals per window from dense boundary logits (B, n, 2): for each start word its best
    span (start logit + end logit, inside the window, at most MAX_PROPOSAL_WIDTH words), then the
    k best start words, as word indices (B, k) of first and last words, best first. One per start
    word spreads them over the window (the k best spans overall crowd around one strong start
    and learned slower). A window of fewer than k words repeats its first word for the rest."""
    batch, n_words, _ = dense.shape
    first = torch.arange(n_words, device=dense.device)
    width = first[None, :] - first[:, None]  # (n, n): last - first
    allowed = (width >= 0) & (width < MAX_PROPOSAL_WIDTH)
    allowed = allowed[None] & word_mask[:, :, None] & word_mask[:, None, :]
    scores = (dense[:, :, None, 0] + dense[:, None, :, 1]).masked_fill(~allowed, 2 * PAD_LOGIT)
    # One proposal per start word (its best end), so the proposals spread over the window.
    per_start, best_end = scores.max(-1)
    if n_words < k:
        per_start = F.pad(per_start, (0, k - n_words), value=3 * PAD_LOGIT)
        best_end = F.pad(best_end, (0, k - n_words))
    best = per_start.topk(k, dim=-1)
    filler = best.values <= 2 * PAD_LOGIT
    # Filler picks (not an allowed span) point at the first word.
    starts = best.indices.masked_fill(filler, 0)
    ends = best_end.gather(1, best.indices).masked_fill(filler, 0)
    return starts, ends


def proposal_prior(starts: torch.Tensor, n_words: int, strength: float) -> torch.Tensor:
    """Pointer-logit bias (B, k, n) centred on each query's proposed boundary word:
    −strength · (word index − proposed index)², in words (not relative positions)."""
    words = torch.arange(n_words, device=starts.device, dtype=torch.float32)
    return -strength * (words[None, None, :] - starts[:, :, None].float()) ** 2


def boundary_probs(logits: torch.Tensor, pointer: str) -> torch.Tensor:
    """Boundary probabilities over the words: a distribution per query ("softmax") or an
    independent probability per word ("sigmoid", PIQN's). Padded words get 0 either way."""
    return torch.softmax(logits, -1) if pointer == "softmax" else torch.sigmoid(logits)


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

    forward takes one (n_i, n_in) tensor per window and returns logits stacked over the layers
    that ran: left/right (L', B, M, n) and class (L', B, M, C), plus the dense boundary logits
    (B, n, 2: "a gold entity starts / ends at this word", read from the last layer's word states;
    (B, n, 0) without ``dense_boundaries``). Training asks for every layer
    (PIQN's auxiliary losses); prediction runs the heads on the last layer only. Windows run in
    length groups of at most ``max_padded_words`` padded words (``length_groups``); the
    outputs come back in input order, padded to the longest window.
    """

    def __init__(self, n_in: int, n_classes: int, settings: HeadSettings = DEFAULT_HEAD, query_in: int = 0):
        super().__init__()
        s = settings
        self.max_padded_words = s.max_padded_words
        self.n_queries = s.n_queries
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
            OneWayLayer(s.width, s.n_heads, s.dropout, s.query_interaction) for _ in range(s.n_layers)
        )
        self.anchor_strength = s.anchor_strength
        self.left = EntityPointer(s.width, s.pointer_width or s.width, s.pointer_fusion)
        self.right = EntityPointer(s.width, s.pointer_width or s.width, s.pointer_fusion)
        self.classifier = EntityClassifier(s.width, s.n_heads, n_classes, s.dropout, s.classifier_dropout, s.pointer)
        # Per-word start/end logits trained on every gold boundary (no matching involved), so
        # the word encoder learns where entities begin and end from the first update.
        self.proposal_strength = s.proposal_strength
        self.dense = nn.Linear(s.width, 2) if s.dense_boundaries or s.proposal_strength else None
        # With proposals, each query starts at one of the dense head's best spans (two-stage /
        # mixed query selection): its pointers get a prior around that span's boundaries and
        # its state the span's boundary words.
        self.proposal_in = nn.Linear(2 * s.width, s.width) if s.proposal_strength else None
        # Denoising queries (training only): a noised gold entity's label embedding plus its
        # boundary words; their pointers get a prior around the noised boundaries.
        self.denoising_prior = s.denoising_prior
        if s.denoising:
            self.denoise_label: Optional[nn.Embedding] = nn.Embedding(n_classes, s.width)
            self.denoise_in: Optional[nn.Linear] = nn.Linear(2 * s.width, s.width)
            self.denoise_norm: Optional[nn.LayerNorm] = nn.LayerNorm(s.width)
        else:
            self.denoise_label = self.denoise_in = self.denoise_norm = None
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
        queries: Optional[List[torch.Tensor]] = None,
        all_layers: bool = False,
        denoise: Optional[torch.Tensor] = None,
    ) -> HeadOutput:
        """denoise: a long tensor (B, D, 3) of noised gold entities (class, left, right) per
        window, to add as denoising queries after the M others (a model built with ``denoising``;
        training only; rows of class 0 are padding): the outputs then hold M + D queries."""
        groups = length_groups([len(w) for w in windows], self.max_padded_words)
        if len(groups) == 1:
            return self._forward(windows, queries, all_layers, denoise)
        n_words = max(len(w) for w in windows)
        parts = []
        for group in groups:
            group_queries = None if queries is None else [queries[i] for i in group]
            group_denoise = None if denoise is None else denoise[group]
            left, right, classes, dense = self._forward(
                [windows[i] for i in group], group_queries, all_layers, group_denoise
            )
            pad = (0, n_words - left.shape[-1])
            dense = F.pad(dense, (0, 0) + pad, value=PAD_LOGIT)
            parts.append((F.pad(left, pad, value=PAD_LOGIT), F.pad(right, pad, value=PAD_LOGIT), classes, dense))
        streams = list(zip(*parts))
        left, right, classes = (in_input_order(list(stream), groups, dim=1) for stream in streams[:3])
        return left, right, classes, in_input_order(list(streams[3]), groups, dim=0)

    def _forward(
        self,
        windows: List[torch.Tensor],
        queries: Optional[List[torch.Tensor]],
        all_layers: bool,
        denoise: Optional[torch.Tensor] = None,
    ) -> HeadOutput:
        words, mask = self.encode_words(windows)
        content, position = self.queries()
        if self.query_in is not None:
            if queries is None:
                raise ValueError(Errors.E038.format(query_in=self.query_in.in_features))
            state = self.query_in(torch.stack(queries))
        else:
            assert content is not None  # learned whenever there is no query_in
            state = content.unsqueeze(0).expand(words.shape[0], -1, -1)
        if self.proposal_in is not None:
            state, left_prior, right_prior, dense = self._start_at_proposals(words, mask, state)
        else:
            # The same for every layer and both pointers.
            left_prior = anchor_prior(mask, self.n_queries, self.anchor_strength) if self.anchor_strength else None
            right_prior, dense = left_prior, None
        query_mask = None
        if denoise is not None and denoise.shape[1]:
            state, position, left_prior, right_prior, query_mask = self._add_denoising(
                words, mask, state, position, left_prior, right_prior, denoise
            )
        lefts, rights, classes = [], [], []
        for i, layer in enumerate(self.layers):
            words, state = layer(words, state, position, mask, query_mask)
            if all_layers or i == len(self.layers) - 1:
                left = self.left(words, state, mask, left_prior)
                right = self.right(words, state, mask, right_prior)
                lefts.append(left)
                rights.append(right)
                classes.append(self.classifier(words, state, mask, left, right))
        if dense is None and self.dense is not None:
            dense = self.dense(words).masked_fill(~mask[:, :, None], PAD_LOGIT)
        elif dense is None:
            dense = words.new_zeros((words.shape[0], words.shape[1], 0))
        return torch.stack(lefts), torch.stack(rights), torch.stack(classes), dense

    def _add_denoising(
        self,
        words: torch.Tensor,
        mask: torch.Tensor,
        state: torch.Tensor,
        position: torch.Tensor,
        left_prior: Optional[torch.Tensor],
        right_prior: Optional[torch.Tensor],
        denoise: torch.Tensor,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Append the D denoising queries of ``denoise`` (B, D, 3) to the M others: state, position (B, M + D, w),
        left/right priors (B, M + D, n) and the query mask (B, M + D, M + D). A denoising query
        takes the position of the query anchored nearest its span's centre; the M queries never
        attend to denoising queries (they carry gold), and a denoising query sees the M queries and
        its own window's denoising queries (DN-DETR's attention mask)."""
        if self.denoise_label is None or self.denoise_in is None or self.denoise_norm is None:
            raise ValueError(Errors.E050)
        batch, n_words, width = words.shape
        n_queries, n_denoise = state.shape[1], denoise.shape[1]
        device = words.device
        label, first, last = denoise.to(device).unbind(-1)
        real = label > 0
        boundary_words = torch.cat([words.gather(1, i[:, :, None].expand(-1, -1, width)) for i in (first, last)], -1)
        noised = self.denoise_norm(self.denoise_label(label) + self.denoise_in(boundary_words))
        lengths = mask.sum(-1, keepdim=True).clamp(min=1)
        centre = (first + last + 1).float() / (2 * lengths)
        nearest = (centre * n_queries).long().clamp(0, n_queries - 1)
        position = torch.cat([position.expand(batch, -1, -1), position[nearest]], 1)
        state = torch.cat([state, noised], 1)
        priors = []
        for prior, boundary in ((left_prior, first), (right_prior, last)):
            if prior is None:
                prior = words.new_zeros((batch, n_queries, n_words))
            around = proposal_prior(boundary, n_words, self.denoising_prior)
            priors.append(torch.cat([prior.expand(batch, -1, -1), around], 1))
        query_mask = torch.ones((batch, n_queries + n_denoise, n_queries + n_denoise), dtype=torch.bool, device=device)
        query_mask[:, :n_queries, n_queries:] = False
        query_mask[:, n_queries:, n_queries:] = real[:, None, :]
        return state, position, priors[0], priors[1], query_mask

    def _start_at_proposals(
        self, words: torch.Tensor, mask: torch.Tensor, state: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries that start at the dense head's proposals (``proposal_strength``): their state
        plus their spans' boundary words, left/right pointer priors around those boundaries, and
        the dense logits (read from the words before the query layers; selection passes no gradient)."""
        assert self.dense is not None and self.proposal_in is not None  # built together
        dense = self.dense(words).masked_fill(~mask[:, :, None], PAD_LOGIT)
        starts, ends = top_spans(dense.detach(), mask, self.n_queries)
        width = words.shape[-1]
        boundary_words = torch.cat([words.gather(1, i[:, :, None].expand(-1, -1, width)) for i in (starts, ends)], -1)
        n_words = words.shape[1]
        return (
            state + self.proposal_in(boundary_words),
            proposal_prior(starts, n_words, self.proposal_strength),
            proposal_prior(ends, n_words, self.proposal_strength),
            dense,
        )
