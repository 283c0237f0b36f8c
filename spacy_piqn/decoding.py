"""From per-query probabilities to entity spans (numpy only).

Per query: the type is the argmax over all classes including "None"; the boundaries are the
argmax of the left and right pointers, or, with a word tagger's probabilities, the pair among
each pointer's best few that the tagger agrees with most (``tagged_boundaries``); spans with
left > right are dropped. A span's score is its class probability times the geometric mean of
its two boundary probabilities, so a query that is sure of the type but not of the boundaries
ranks below one that is sure of both.
Candidates are ranked by score and filtered: ``nested`` drops spans crossing a kept span and
keeps one label per span, ``flat`` keeps no overlaps at all.
"""

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .settings import DEFAULT_DECODING, check_decoding_mode
from .windows import Window

Candidates = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

# Boundaries each pointer offers the word tagger's check (``tagged_boundaries``).
TAGGED_TOP_K = 3
# Tagger probabilities are clipped to [EPS, 1 - EPS] before their logarithm.
EPS = 1e-4


def tagged_boundaries(
    p_left: np.ndarray,
    p_right: np.ndarray,
    tags: np.ndarray,
    types: np.ndarray,
    weight: float,
    lengths: Optional[Sequence[int]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Each query's (left, right) among the top ``TAGGED_TOP_K`` of its two pointers, by
    log P_left + log P_right + weight × (the mean log P_tag(type) over the words inside + the
    log (1 - P_tag(type)) of the word just outside either end).

    The pointers choose the two ends independently and often stop one word short of a name
    ("Sean" of "Sean Penn"), while the word tagger still marks the missing word with the type.
    For a batch of windows at once: p_left, p_right (B, M, n), padding 0; tags (B, n, labels),
    the tagger's probabilities; types (B, M) class ids ("None" reads label 1's tags: its query is
    dropped anyway); lengths: each window's real words (default all n), beyond which nothing
    counts as outside. Returns (B, M) lefts and rights; a query whose every pair is impossible
    (probability 0, or left > right) keeps its pointers' argmax."""
    n_windows, n_queries, n = p_left.shape
    k = min(TAGGED_TOP_K, n)
    lefts = np.argsort(-p_left, axis=-1, kind="stable")[..., :k, None]  # (B, M, k, 1)
    rights = np.argsort(-p_right, axis=-1, kind="stable")[..., None, :k]  # (B, M, 1, k)
    batch = np.arange(n_windows)[:, None, None, None]
    query = np.arange(n_queries)[None, :, None, None]
    # (B, M, n): each word's probability of the query's type.
    tag = np.take_along_axis(tags, np.maximum(types - 1, 0)[:, None, :], axis=-1).transpose(0, 2, 1)
    tag = np.clip(tag, EPS, 1 - EPS)
    inside = np.pad(np.cumsum(np.log(tag), axis=-1), ((0, 0), (0, 0), (1, 0)))
    # Word i outside at column i + 1; column 0, column n + 1 and padded words cost nothing.
    real = np.arange(n)[None, :] < (np.asarray(lengths)[:, None] if lengths is not None else n)
    outside = np.pad(np.log1p(-tag) * real[:, None, :], ((0, 0), (0, 0), (1, 1)))
    length = rights - lefts + 1
    agreement = (inside[batch, query, rights + 1] - inside[batch, query, lefts]) / np.maximum(length, 1)
    agreement = agreement + outside[batch, query, lefts] + outside[batch, query, rights + 2]
    with np.errstate(divide="ignore"):
        score = np.log(p_left[batch, query, lefts]) + np.log(p_right[batch, query, rights]) + weight * agreement
    score = np.where(length >= 1, score, -np.inf).reshape(n_windows, n_queries, -1)
    # All -inf: argmax 0, the two argmaxes.
    best_left, best_right = np.divmod(score.argmax(-1), k)
    return (
        np.take_along_axis(lefts[..., 0], best_left[..., None], -1)[..., 0],
        np.take_along_axis(rights[..., 0, :], best_right[..., None], -1)[..., 0],
    )


def query_spans(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    class_threshold: float = 0.0,
    boundary_threshold: float = 0.0,
    boundaries: Optional[Tuple[np.ndarray, np.ndarray]] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every query's entity in one window: (valid, starts, ends, types, scores), one entry per
    query; ``valid`` marks the queries that predict an entity (not "None", left <= right, above
    the thresholds). Ends are exclusive; scores are class probability × √(P_left · P_right).
    boundaries: each query's (left, right) word, e.g. from ``tagged_boundaries``; default the
    pointers' argmax."""
    types = p_class.argmax(-1)
    class_probs = p_class.max(-1)
    lefts, rights = boundaries if boundaries is not None else (p_left.argmax(-1), p_right.argmax(-1))
    left_probs = np.take_along_axis(p_left, lefts[:, None], -1)[:, 0]
    right_probs = np.take_along_axis(p_right, rights[:, None], -1)[:, 0]
    valid = (
        (types != 0)
        & (class_probs > class_threshold)
        & (lefts <= rights)
        & (left_probs > boundary_threshold)
        & (right_probs > boundary_threshold)
    )
    scores = class_probs * np.sqrt(left_probs * right_probs)
    return valid, lefts, rights + 1, types, scores


def decode_queries(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    class_threshold: float = 0.0,
    boundary_threshold: float = 0.0,
    boundaries: Optional[Tuple[np.ndarray, np.ndarray]] = None,
) -> Candidates:
    """Candidate spans of one window: (starts, ends) with exclusive ends, class ids (>= 1,
    0 is "None") and span scores (class probability × √(P_left · P_right))."""
    valid, starts, ends, types, scores = query_spans(
        p_class, p_left, p_right, class_threshold, boundary_threshold, boundaries
    )
    return starts[valid], ends[valid], types[valid], scores[valid]


def decode_windows(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    windows: Sequence[Window],
    n_docs: int,
    class_threshold: float = 0.0,
    boundary_threshold: float = 0.0,
    tags: Optional[np.ndarray] = None,
    tag_weight: float = 0.0,
) -> List[Candidates]:
    """Candidates of every doc, in doc coordinates, from the probabilities of all windows:
    p_class (B, M, C) and p_left/p_right (B, M, n) with n the longest window (padding ignored);
    tags (B, n, labels), a word tagger's probabilities, or None; with ``tag_weight`` > 0 they
    check the boundaries (``tagged_boundaries``).

    Where windows of a long sentence overlap, each span is taken from the window that owns its
    centre (``owned_spans``): a window cut through an entity sees only part of it and may point at
    the part, while the neighbour that owns it sees it whole."""
    found: List[List[Candidates]] = [[] for _ in range(n_docs)]
    lengths = [window.end - window.start for window in windows]
    checked = window_boundaries(p_class, p_left, p_right, lengths, tags, tag_weight)
    for b, (window, n) in enumerate(zip(windows, lengths)):
        starts, ends, types, scores = decode_queries(
            p_class[b],
            p_left[b, :, :n],
            p_right[b, :, :n],
            class_threshold,
            boundary_threshold,
            None if checked is None else (checked[0][b], checked[1][b]),
        )
        found[window.doc].append((starts + window.start, ends + window.start, types, scores))
    empty: Candidates = (
        np.zeros((0,), dtype=np.int64),
        np.zeros((0,), dtype=np.int64),
        np.zeros((0,), dtype=np.int64),
        np.zeros((0,), dtype=np.float32),
    )
    for doc, doc_windows in _by_doc(windows).items():
        if all(a.end <= b.start for a, b in zip(doc_windows, doc_windows[1:])):
            continue  # sentence windows only: each owns all its spans
        found[doc] = [
            tuple(part[owned_spans(cand[0], cand[1], doc_windows, k)] for part in cand)  # type: ignore[misc]
            for k, cand in enumerate(found[doc])
        ]
    return [tuple(np.concatenate(part) for part in zip(*parts)) if parts else empty for parts in found]  # type: ignore[misc]


def window_boundaries(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    lengths: Sequence[int],
    tags: Optional[np.ndarray],
    tag_weight: float,
) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(B, M) boundaries of every window's queries checked by a word tagger (``tagged_boundaries``),
    or None where there is no tagger, a weight of 0 or no word: the pointers' argmax then."""
    if tags is None or tag_weight <= 0 or not p_left.size:
        return None
    return tagged_boundaries(p_left, p_right, tags, p_class.argmax(-1), tag_weight, lengths)


def _by_doc(windows: Sequence[Window]) -> dict:
    by_doc: dict = {}
    for window in windows:
        by_doc.setdefault(window.doc, []).append(window)
    return by_doc


def owned_spans(starts: np.ndarray, ends: np.ndarray, windows: Sequence[Window], k: int) -> np.ndarray:
    """Mask of the spans [starts, ends) of ``windows[k]`` (one doc's windows, in order) to keep.

    Consecutive windows split their overlap at its middle, so every token position belongs to one
    window's core; a span is kept from the window whose core holds its centre, or from any window
    that has it whole when that one does not. Spans up to ``size - stride`` tokens always lie whole
    in their owner; windows that do not overlap (sentences) own all their tokens."""
    # Core borders in doubled coordinates (2·position), so that centres (start + end) stay integers.
    borders = np.array([windows[i - 1].end + windows[i].start for i in range(1, len(windows))], dtype=np.int64)
    owner = np.searchsorted(borders, starts + ends, side="right")
    owner_start = np.array([w.start for w in windows], dtype=np.int64)[owner]
    owner_end = np.array([w.end for w in windows], dtype=np.int64)[owner]
    return (owner == k) | (starts < owner_start) | (ends > owner_end)


def keep_candidates(
    starts: np.ndarray, ends: np.ndarray, types: np.ndarray, scores: np.ndarray, cfg: Mapping[str, Any]
) -> np.ndarray:
    """``filter_candidates`` with a component's decoding settings (``DecodingSettings`` keys in its cfg)."""
    merge = cfg["merge_nested_duplicates"]
    return filter_candidates(starts, ends, scores, cfg["decoding"], types if merge else None, cfg["merge_keep_ratio"])


def filter_candidates(
    starts: np.ndarray,
    ends: np.ndarray,
    scores: np.ndarray,
    mode: str = "nested",
    types: Optional[np.ndarray] = None,
    keep_ratio: float = DEFAULT_DECODING.merge_keep_ratio,
) -> np.ndarray:
    """Indices of the candidates to keep, best score first.

    nested: a candidate is dropped if it crosses a kept span (partial overlap, sharing a word
    counts) or has the same boundaries as one; nesting survives. With ``types`` given, a
    candidate nested in (or around) a kept span of the same type that shares its left or right
    boundary is dropped too, unless its score is at least ``keep_ratio`` times that span's
    (> 1: always dropped): several of PIQN's queries learn each entity (one-to-many
    assignment), and their near misses look exactly like that, with lower scores; a real
    same-label nest scores about as high as its parent (bench/RESULTS.md).
    flat: dropped on any overlap.
    """
    check_decoding_mode(mode)
    order = np.argsort(-scores, kind="stable")
    kept: List[int] = []
    kept_starts = np.zeros((len(order),), dtype=np.int64)
    kept_ends = np.zeros((len(order),), dtype=np.int64)
    kept_types = np.zeros((len(order),), dtype=np.int64)
    kept_scores = np.zeros((len(order),), dtype=np.float64)
    for i in order:
        s, e = starts[i], ends[i]
        n = len(kept)
        ks, ke = kept_starts[:n], kept_ends[:n]
        overlap = (ks < e) & (s < ke)
        if mode == "flat":
            clash = overlap
        else:
            inside = (ks <= s) & (e <= ke)
            contains = (s <= ks) & (ke <= e)
            same = (ks == s) & (ke == e)
            clash = (overlap & ~inside & ~contains) | same
            if types is not None:
                shares_boundary = (ks == s) | (ke == e)
                weaker = scores[i] < keep_ratio * kept_scores[:n]
                clash |= (inside | contains) & shares_boundary & (kept_types[:n] == types[i]) & weaker
        if not clash.any():
            kept_starts[n] = s
            kept_ends[n] = e
            kept_scores[n] = scores[i]
            if types is not None:
                kept_types[n] = types[i]
            kept.append(i)
    return np.asarray(kept, dtype=np.int64)
