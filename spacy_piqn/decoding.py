"""From per-query probabilities to entity spans (numpy only).

Per query: the type is the argmax over all classes including "None"; the boundaries are the
argmax of the left and right pointers; spans with left > right are dropped. Candidates are
ranked by class probability and filtered: ``nested`` drops spans crossing a kept span and
keeps one label per span, ``flat`` keeps no overlaps at all.
"""

from typing import Tuple

import numpy as np

DECODING_MODES = ("nested", "flat")

Candidates = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def decode_queries(
    p_class: np.ndarray,
    p_left: np.ndarray,
    p_right: np.ndarray,
    class_threshold: float = 0.0,
    boundary_threshold: float = 0.0,
) -> Candidates:
    """Candidate spans of one window: (starts, ends) with exclusive ends, class ids (>= 1,
    0 is "None") and class probabilities."""
    types = p_class.argmax(-1)
    scores = p_class.max(-1)
    lefts = p_left.argmax(-1)
    rights = p_right.argmax(-1)
    keep = (
        (types != 0)
        & (scores > class_threshold)
        & (lefts <= rights)
        & (p_left.max(-1) > boundary_threshold)
        & (p_right.max(-1) > boundary_threshold)
    )
    return lefts[keep], rights[keep] + 1, types[keep], scores[keep]


def filter_candidates(starts: np.ndarray, ends: np.ndarray, scores: np.ndarray, mode: str = "nested") -> np.ndarray:
    """Indices of the candidates to keep, best score first.

    nested: a candidate is dropped if it crosses a kept span (partial overlap, sharing a word
    counts) or has the same boundaries as one; nesting survives. flat: dropped on any overlap.
    """
    if mode not in DECODING_MODES:
        raise ValueError(f"decoding must be one of {DECODING_MODES}, got {mode!r}")
    order = np.argsort(-scores, kind="stable")
    kept = []
    kept_starts = np.zeros((len(order),), dtype=np.int64)
    kept_ends = np.zeros((len(order),), dtype=np.int64)
    for i in order:
        s, e = starts[i], ends[i]
        ks, ke = kept_starts[: len(kept)], kept_ends[: len(kept)]
        overlap = (ks < e) & (s < ke)
        if mode == "flat":
            clash = overlap
        else:
            inside = (ks <= s) & (e <= ke)
            contains = (s <= ks) & (ke <= e)
            same = (ks == s) & (ke == e)
            clash = (overlap & ~inside & ~contains) | same
        if not clash.any():
            kept_starts[len(kept)] = s
            kept_ends[len(kept)] = e
            kept.append(i)
    return np.asarray(kept, dtype=np.int64)
