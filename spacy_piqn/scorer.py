"""Span metrics for the PIQN component: strict, localization and classification.

PIQN reports three micro-averaged P/R/F triples. They are computed here over
``doc.spans[spans_key]`` with the key prefix ``spans_<key>``:

* **Strict** (``spans_<key>_p``, ``_r``, ``_f``, ``_per_type``): a predicted span
  is correct iff its start, end and label all match a gold span. This part is
  spaCy's own ``Scorer.score_spans`` with the same arguments as spaCy's
  ``spancat_score``, so ``spacy train`` and ``spacy evaluate`` show the same
  numbers they would for ``spancat``, and ``spans_<key>_f`` works as a
  ``[training.score_weights]`` entry.
* **Localization** (``spans_<key>_loc_p``, ``_loc_r``, ``_loc_f``): boundaries
  only, labels ignored (``score_spans(..., labeled=False)``). Two gold spans with
  the same boundaries and different labels count once.
* **Classification** (``spans_<key>_cls_p``, ``_cls_r``, ``_cls_f``): how well
  the labels are chosen once the boundaries are right, as the paper defines it.
  Precision is correctly typed predictions over the predictions whose
  boundaries equal those of some gold span; recall is correctly typed
  predictions over all gold spans, and so always equals strict recall.
* **Errors** (``spans_<key>_errors``): counts that say where the F goes. Each
  prediction is ``correct`` (a gold span), ``wrong_type`` (gold boundaries, no
  gold span with its label there), ``wrong_boundaries`` (overlaps a gold span
  without matching its boundaries) or ``spurious`` (overlaps none); ``missed``
  counts the gold spans no prediction overlaps. A model that finds too few
  entities shows it in ``missed``, one that confuses types in ``wrong_type``.

All of them share spaCy's conventions. Spans form a set per doc (duplicates
collapse), counts are summed over docs before dividing (micro average),
predictions are mapped onto the reference tokens with
``Example.get_aligned_spans_x2y(..., allow_overlap=True)`` (a prediction that
does not align to whole reference tokens is dropped), and only docs whose
reference has ``spans_key`` in ``doc.spans`` are scored. A reference with an
empty group under the key is scored, so predictions on it are false positives.
A triple whose counts are all zero is ``None`` (spaCy reports "nothing to
score" this way). Classification is therefore ``None`` whenever no scored doc
has a gold span, and its precision is ``0.0`` when gold spans exist but no
prediction has gold boundaries, just as strict precision is ``0.0`` when
nothing was predicted.
"""

from typing import Any, Dict, Iterable, Iterator, Optional, Set, Tuple

from spacy.scorer import PRFScore, Scorer
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry


def piqn_score(examples: Iterable[Example], *, spans_key: str = "sc", **kwargs: Any) -> Dict[str, Any]:
    """Score ``doc.spans[spans_key]`` with PIQN's strict, localization and
    classification metrics (see the module docstring for the definitions).

    examples (Iterable[Example]): The examples to score. Iterated three times,
        so a generator is read into a list first.
    spans_key (str): The key in ``doc.spans`` holding gold and predicted spans.
    **kwargs: Ignored. ``Pipe.score`` passes the whole component cfg (labels,
        thresholds, ...) here.
    RETURNS (Dict[str, Any]): ``spans_<key>_p/_r/_f/_per_type``,
        ``spans_<key>_loc_p/_loc_r/_loc_f``, ``spans_<key>_cls_p/_cls_r/_cls_f`` and
        ``spans_<key>_errors``.
    """
    examples = list(examples)
    attr = f"spans_{spans_key}"

    def get_spans(doc: Doc, _attr: str):
        return doc.spans.get(spans_key, [])

    def has_annotation(doc: Doc) -> bool:
        return spans_key in doc.spans

    scores = Scorer.score_spans(
        examples,
        attr=attr,
        getter=get_spans,
        has_annotation=has_annotation,
        allow_overlap=True,
        labeled=True,
    )
    scores.update(
        Scorer.score_spans(
            examples,
            attr=f"{attr}_loc",
            getter=get_spans,
            has_annotation=has_annotation,
            allow_overlap=True,
            labeled=False,
        )
    )
    cls = _classification_counts(examples, spans_key)
    scores[f"{attr}_cls_p"] = _or_none(cls, cls.precision)
    scores[f"{attr}_cls_r"] = _or_none(cls, cls.recall)
    scores[f"{attr}_cls_f"] = _or_none(cls, cls.fscore)
    scores[f"{attr}_errors"] = _error_counts(examples, spans_key)
    return scores


def _error_counts(examples: Iterable[Example], spans_key: str) -> Dict[str, int]:
    """What became of every prediction and which gold spans nothing overlaps (the module docstring, "Errors")."""
    counts = dict.fromkeys(("correct", "wrong_type", "wrong_boundaries", "spurious", "missed"), 0)
    for gold, gold_bounds, predicted in _scored_docs(examples, spans_key):
        for start, end, label in predicted:
            if (start, end, label) in gold:
                counts["correct"] += 1
            elif (start, end) in gold_bounds:
                counts["wrong_type"] += 1
            elif any(start < g_end and g_start < end for g_start, g_end in gold_bounds):
                counts["wrong_boundaries"] += 1
            else:
                counts["spurious"] += 1
        counts["missed"] += sum(
            not any(start < p_end and p_start < end for p_start, p_end, _ in predicted) for start, end, _ in gold
        )
    return counts


def _classification_counts(examples: Iterable[Example], spans_key: str) -> PRFScore:
    """Count classification outcomes, micro-summed over the scored docs.

    tp: predictions equal to a gold span (boundaries and label).
    fp: predictions with gold boundaries but a label no gold span at those
        boundaries has. Predictions with wrong boundaries are left out.
    fn: gold spans not predicted with their label.
    """
    counts = PRFScore()
    for gold, gold_bounds, predicted in _scored_docs(examples, spans_key):
        localized = {span for span in predicted if span[:2] in gold_bounds}
        correct = localized & gold
        counts.tp += len(correct)
        counts.fp += len(localized - correct)
        counts.fn += len(gold - correct)
    return counts


def _scored_docs(examples: Iterable[Example], spans_key: str) -> Iterator[Tuple[Set, Set, Set]]:
    """Per scored doc (its reference has ``spans_key``): gold (start, end, label), gold (start, end) and the
    predictions as (start, end, label) on the reference tokens."""
    for eg in examples:
        if spans_key not in eg.reference.spans:
            continue
        gold = {(s.start, s.end, s.label_) for s in eg.reference.spans[spans_key]}
        aligned = eg.get_aligned_spans_x2y(eg.predicted.spans.get(spans_key, []), allow_overlap=True)
        yield gold, {(start, end) for start, end, _ in gold}, {(s.start, s.end, s.label_) for s in aligned}


def _or_none(counts: PRFScore, value: float) -> Optional[float]:
    return value if len(counts) > 0 else None


@registry.scorers("spacy-piqn.piqn_scorer.v1")
def make_piqn_scorer():
    """Return ``piqn_score``: spancat-compatible strict span P/R/F plus PIQN's
    localization and classification P/R/F."""
    return piqn_score
