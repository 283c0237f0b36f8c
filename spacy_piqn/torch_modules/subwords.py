"""Subword encoding of pre-tokenized windows for the query-carrying transformer encoder.

A window is (left context words, window words, right context words). The transformer sees
``[CLS] left + words + right [SEP]`` (``<s> … </s>`` for RoBERTa); only the window words are
pooled into word vectors, so context reaches the output through self-attention alone
(the paper's §3.2 "Encoder"). Unlike the official code, which drops any document over 512 subwords,
context is trimmed to fit, outermost words first.
"""

import json
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch

from ..errors import Errors

# (left context words, window words, right context words) of one window.
ContextWindow = Tuple[Sequence[str], Sequence[str], Sequence[str]]


@dataclass
class EncodedBatch:
    """Padded transformer inputs for B windows (T = longest sequence in the batch).

    input_ids, attention_mask, token_type_ids: (B, T) long tensors, padded with the
        tokenizer's pad id / 0 / 0.
    word_index: (B, T) long. For a subword of window word j this is j; for [CLS], [SEP],
        context subwords and padding it is -1. This is the pooling spec that
        ``QueryTransformer.forward`` turns into one flat ``scatter_reduce`` index. A word with no
        subwords simply never appears here, and pools to zeros.
    n_words: (B,) long, the number of window words per window (n = n_words.max()).
    context_kept: per window, how many (left, right) context words made it into the
        sequence; the kept ones are always the ones nearest the window.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    word_index: torch.Tensor
    n_words: torch.Tensor
    context_kept: List[Tuple[int, int]]

    def to(self, device) -> "EncodedBatch":
        return EncodedBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            token_type_ids=self.token_type_ids.to(device),
            word_index=self.word_index.to(device),
            n_words=self.n_words,
            context_kept=self.context_kept,
        )


def encode_windows(
    tokenizer,
    windows: Sequence[ContextWindow],
    max_length: int,
    segment_ids: bool = False,
) -> EncodedBatch:
    """Tokenize pre-tokenized windows with a fast tokenizer and align subwords to words.

    tokenizer: a Hugging Face *fast* tokenizer (word alignment comes from ``word_ids()``).
        Byte-level BPE tokenizers (RoBERTa) must be loaded with ``add_prefix_space=True``.
    windows: (left_context_words, words, right_context_words) per window.
    max_length: the longest sequence, special tokens included; use at most the model's limit
        (``QueryTransformer.max_length``).
    segment_ids: give window subwords token type 1 (context and special tokens get 0), as the
        official BERT setup does. Only for models with ``type_vocab_size > 1``
        (``QueryTransformer.uses_segment_ids``); RoBERTa has a single token type.

    If a window does not fit, its context is trimmed: context words are added nearest-first,
    always to the side that so far holds fewer context subwords, until the next word would
    not fit. If the window words alone need more than ``max_length - 2`` subwords a
    ValueError asks for smaller windows.
    """
    _check_tokenizer(tokenizer)
    budget = max_length - 2
    if budget < 1:
        raise ValueError(Errors.E027.format(max_length=max_length))
    # Each side is cut to the ``max_length`` nearest words before tokenizing, so a whole-doc
    # context costs no more than this. Only words with zero subwords could have fit beyond it.
    lefts = [list(left)[-max_length:] for left, _, _ in windows]
    rights = [list(right)[:max_length] for _, _, right in windows]
    middles = [list(words) for _, words, _ in windows]
    word_lists = [left + middle + right for left, middle, right in zip(lefts, middles, rights)]
    for i, words in enumerate(word_lists):
        for word in words:
            if not isinstance(word, str):
                raise TypeError(Errors.E028.format(window=i, type=type(word).__name__, word=word))
    encoded = tokenizer(word_lists, is_split_into_words=True, add_special_tokens=False, verbose=False)

    rows: List[Tuple[List[int], List[int], List[int]]] = []
    n_words: List[int] = []
    context_kept: List[Tuple[int, int]] = []
    for i, (left, middle, _right) in enumerate(zip(lefts, middles, rights)):
        ids = encoded["input_ids"][i]
        word_ids = encoded.word_ids(i)
        counts = [0] * len(word_lists[i])
        for w in word_ids:
            counts[w] += 1
        n_left, n_mid = len(left), len(middle)
        left_counts = counts[:n_left]
        mid_counts = counts[n_left : n_left + n_mid]
        right_counts = counts[n_left + n_mid :]
        n_mid_sub = sum(mid_counts)
        if n_mid_sub > budget:
            raise ValueError(Errors.E029.format(window=i, n_words=n_mid, n_subwords=n_mid_sub, budget=budget))
        keep_left, keep_right = _fit_context(left_counts, right_counts, budget - n_mid_sub)
        left_sub = sum(left_counts[n_left - keep_left :])
        right_sub = sum(right_counts[:keep_right])
        # Subwords of word k are contiguous, so the kept part is one slice of ``ids``.
        start = sum(left_counts) - left_sub
        stop = start + left_sub + n_mid_sub + right_sub
        kept_ids = ids[start:stop]
        index = [-1] * left_sub
        index += [w - n_left for w in word_ids[start + left_sub : start + left_sub + n_mid_sub]]
        index += [-1] * right_sub
        types = [0] * left_sub + [1 if segment_ids else 0] * n_mid_sub + [0] * right_sub
        rows.append((kept_ids, index, types))
        n_words.append(n_mid)
        context_kept.append((keep_left, keep_right))
    return _pad(tokenizer, rows, n_words, context_kept)


def _check_tokenizer(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(Errors.E030.format(tokenizer=type(tokenizer).__name__))
    for name in ("cls_token_id", "sep_token_id", "pad_token_id"):
        if getattr(tokenizer, name, None) is None:
            raise ValueError(Errors.E031.format(tokenizer=type(tokenizer).__name__, token=name[:-3]))
    if _byte_level_without_prefix_space(tokenizer):
        # Byte-level BPE folds the space before a word into its first subword ("Ġword").
        # Pre-tokenized words carry no spaces, so without a prefix space every word would be
        # encoded as if glued to the previous one, giving subwords the model rarely saw.
        raise ValueError(Errors.E032.format(tokenizer=type(tokenizer).__name__))


def _byte_level_without_prefix_space(tokenizer) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre_tokenizer = getattr(backend, "pre_tokenizer", None)
    if pre_tokenizer is None:
        return False
    stack = [json.loads(pre_tokenizer.__getstate__())]
    while stack:
        state = stack.pop()
        if state.get("type") == "ByteLevel" and not state.get("add_prefix_space", False):
            return True
        stack.extend(state.get("pretokenizers", []))
    return False


def _fit_context(left_counts: List[int], right_counts: List[int], room: int) -> Tuple[int, int]:
    """How many context words to keep on each side (nearest first) within ``room`` subwords."""
    n_left = n_right = 0
    used_left = used_right = 0
    left_open, right_open = bool(left_counts), bool(right_counts)
    while left_open or right_open:
        take_left = left_open and (not right_open or used_left <= used_right)
        if take_left:
            cost = left_counts[len(left_counts) - 1 - n_left]
            if cost > room:
                left_open = False
                continue
            room -= cost
            used_left += cost
            n_left += 1
            left_open = n_left < len(left_counts)
        else:
            cost = right_counts[n_right]
            if cost > room:
                right_open = False
                continue
            room -= cost
            used_right += cost
            n_right += 1
            right_open = n_right < len(right_counts)
    return n_left, n_right


def _pad(tokenizer, rows, n_words, context_kept) -> EncodedBatch:
    cls_id, sep_id, pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    length = max((len(ids) for ids, _, _ in rows), default=0) + 2
    batch = len(rows)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, length), dtype=torch.long)
    token_type_ids = torch.zeros((batch, length), dtype=torch.long)
    word_index = torch.full((batch, length), -1, dtype=torch.long)
    for b, (ids, index, types) in enumerate(rows):
        size = len(ids) + 2
        input_ids[b, :size] = torch.tensor([cls_id] + ids + [sep_id], dtype=torch.long)
        attention_mask[b, :size] = 1
        if ids:
            token_type_ids[b, 1 : size - 1] = torch.tensor(types, dtype=torch.long)
            word_index[b, 1 : size - 1] = torch.tensor(index, dtype=torch.long)
    return EncodedBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        word_index=word_index,
        n_words=torch.tensor(n_words, dtype=torch.long),
        context_kept=context_kept,
    )
