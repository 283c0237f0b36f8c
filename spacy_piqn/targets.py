"""Gold spans → per-window training targets, and the count of what no window can use (numpy only).

The component reads gold spans from each example (with their label ids); this module cuts them
into the windows the head predicts on and counts every span that cannot be trained on, so the
component can report them once per batch instead of dropping them silently.
"""

from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

import numpy as np

from .windows import Window


@dataclass
class TargetReport:
    """Gold spans of one batch that the targets leave out, by reason."""

    n_outside: int = 0  # in no window (crossing a sentence, longer than the window overlap)
    n_over_capacity: int = 0  # beyond the M queries of a window (the assignment keeps the first M)
    crowded: List[Tuple[Window, int]] = field(default_factory=list)  # (window, its gold count)


def window_targets(
    per_doc: Sequence[np.ndarray], windows: Sequence[Window], n_queries: int
) -> Tuple[List[np.ndarray], TargetReport]:
    """Per window an int array (G, 3) of (class id, left, right) with inclusive, window-relative
    word indices, from per-doc arrays of (class id, start, end) with exclusive ends."""
    report = TargetReport()
    covered = [np.zeros(len(spans), dtype=bool) for spans in per_doc]
    targets = []
    for w in windows:
        spans = per_doc[w.doc]
        inside = (spans[:, 1] >= w.start) & (spans[:, 2] <= w.end)
        covered[w.doc] |= inside
        local = spans[inside] - np.array([0, w.start, w.start + 1])
        if len(local) > n_queries:
            report.n_over_capacity += len(local) - n_queries
            report.crowded.append((w, len(local)))
        targets.append(local)
    report.n_outside = sum(int((~c).sum()) for c in covered)
    return targets, report
