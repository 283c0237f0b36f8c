"""Denoising queries (DN-DETR's idea, for spans): in training, each window's gold entities also
enter the head as extra queries built from a noised copy (boundaries moved, label sometimes
redrawn) that must give back the gold entity. Their targets need no matching, so the pointer and
the classifier get a stable signal from the first update; matching queries never see them.
numpy only: the head builds the queries, ``loss.denoising_loss`` trains them.
"""

from typing import List, Sequence

import numpy as np


def noised_copies(
    gold: Sequence[np.ndarray],
    lengths: Sequence[int],
    n_classes: int,
    boundary_noise: float,
    label_noise: float,
    max_per_window: int,
    rng: np.random.Generator,
) -> List[np.ndarray]:
    """Per window an int array (D, 6): the gold (class, left, right) and its noised copy (class,
    left, right), inclusive word indices, for the first ``max_per_window`` gold entities.

    Each boundary moves by an integer drawn uniformly from ±ceil(boundary_noise · width) (so a
    one-word entity moves by up to one word at any noise above 0), clipped to the window; a copy
    whose boundaries cross is swapped back into order. With probability ``label_noise`` the label
    is redrawn from all n_classes - 1 entity classes (it may come out the same)."""
    copies = []
    for window_gold, n_words in zip(gold, lengths):
        window_gold = np.asarray(window_gold, dtype=np.int64).reshape(-1, 3)[:max_per_window]
        n = len(window_gold)
        classes, left, right = window_gold[:, 0].copy(), window_gold[:, 1], window_gold[:, 2]
        reach = np.ceil(boundary_noise * (right - left + 1)).astype(np.int64)
        new_left = np.clip(left + rng.integers(-reach, reach + 1), 0, n_words - 1)
        new_right = np.clip(right + rng.integers(-reach, reach + 1), 0, n_words - 1)
        new_left, new_right = np.minimum(new_left, new_right), np.maximum(new_left, new_right)
        redraw = rng.random(n) < label_noise
        classes[redraw] = rng.integers(1, n_classes, size=int(redraw.sum()))
        copies.append(np.stack([window_gold[:, 0], left, right, classes, new_left, new_right], axis=1))
    return copies
