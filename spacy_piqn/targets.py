"""Gold spans → per-window training targets, and a report of what no window can use.

Reads each example's gold spans (aligned to the predicted tokens, nested ones included), cuts
them into the windows the head predicts on and counts every span that cannot be trained on, so
the component reports them once per batch instead of dropping them silently. numpy and spaCy's
``Example`` only: no torch.
"""

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from spacy.training import Example

from .errors import Errors, Warnings
from .windows import Window

logger = logging.getLogger("spacy_piqn")


@dataclass
class TargetReport:
    """Gold spans of one batch that the targets leave out, by reason."""

    n_outside: int = 0  # in no window (crossing a sentence, longer than the window overlap)
    first_outside: Optional[Tuple[int, int, int]] = None  # (doc, start, end) of one of them, for the warning
    n_over_capacity: int = 0  # beyond the M queries of a window (the assignment keeps the first M)
    crowded: List[Tuple[Window, int]] = field(default_factory=list)  # (window, its gold count)
    n_unaligned: int = 0  # not aligned with the predicted tokens

    def log(self, n_queries: int) -> None:
        """One warning per reason for the whole batch (not per window), so a log stays readable."""
        if self.crowded:
            window, n_gold = self.crowded[0]
            logger.warning(
                Warnings.W001.format(
                    n_windows=len(self.crowded),
                    n_queries=n_queries,
                    n_dropped=self.n_over_capacity,
                    doc=window.doc,
                    start=window.start,
                    end=window.end,
                    n_gold=n_gold,
                )
            )
        if self.first_outside is not None:  # set whenever n_outside > 0
            doc, start, end = self.first_outside
            logger.warning(Warnings.W002.format(n=self.n_outside, doc=doc, start=start, end=end))
        if self.n_unaligned:
            logger.warning(Warnings.W003.format(n=self.n_unaligned))


def gold_spans(
    examples: Sequence[Example], spans_key: str, labels: Sequence[str], name: str
) -> Tuple[List[np.ndarray], int]:
    """Per example an int array (G, 3) of (class id, start, end), ids from 1 in ``labels`` order
    (0 is "None"), with the number of gold spans that do not align with the predicted tokens.
    An unknown label is an error (E001): the classifier has no output for it."""
    label_ids: Dict[str, int] = {label: i + 1 for i, label in enumerate(labels)}
    per_doc: List[np.ndarray] = []
    n_unaligned = 0
    for i, eg in enumerate(examples):
        reference = list(eg.reference.spans.get(spans_key, []))
        aligned = eg.get_aligned_spans_y2x(reference, allow_overlap=True)
        n_unaligned += len(reference) - len(aligned)
        rows = []
        for span in aligned:
            if span.label_ not in label_ids:
                raise ValueError(
                    Errors.E001.format(
                        span=span.text,
                        start=span.start,
                        end=span.end,
                        example=i,
                        label=span.label_,
                        name=name,
                        labels=list(labels),
                    )
                )
            rows.append((label_ids[span.label_], span.start, span.end))
        per_doc.append(np.asarray(rows, dtype=np.int64).reshape(-1, 3))
    return per_doc, n_unaligned


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
    for i, c in enumerate(covered):
        missing = np.flatnonzero(~c)
        report.n_outside += len(missing)
        if len(missing) and report.first_outside is None:
            _, start, end = per_doc[i][missing[0]]
            report.first_outside = (i, int(start), int(end))
    return targets, report
