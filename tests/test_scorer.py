"""Hand-checked cases for the PIQN scorer (strict / localization / classification).

Spans in the comments are (start, end, label) on reference tokens, end exclusive.
Most cases use the reference "IL-2 gene expression" with the GENIA-style nesting
"IL-2 gene" (DNA) around "IL-2" (protein).
"""

from typing import List, Optional, Sequence, Tuple

import pytest
import spacy
from spacy.pipeline.spancat import spancat_score
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from spacy_piqn.scorer import make_piqn_scorer, piqn_score

KEY = "sc"
WORDS = ["IL-2", "gene", "expression"]
SpanTuple = Tuple[int, int, str]
MISSING = object()  # the doc has no group under the key at all


@pytest.fixture(scope="module")
def vocab():
    return Vocab()


def make_doc(vocab, words, spans, key=KEY, spaces=None) -> Doc:
    doc = Doc(vocab, words=list(words), spaces=spaces)
    if spans is not MISSING:
        doc.spans[key] = [Span(doc, s, e, label=label) for s, e, label in spans]
    return doc


def make_example(
    vocab,
    gold,
    pred,
    *,
    words: Sequence[str] = WORDS,
    pred_words: Optional[Sequence[str]] = None,
    pred_spaces: Optional[List[bool]] = None,
    key: str = KEY,
) -> Example:
    """The Example keeps both docs alive, so their span groups stay valid."""
    ref = make_doc(vocab, words, gold, key)
    pred_doc = make_doc(vocab, pred_words or words, pred, key, spaces=pred_spaces)
    return Example(pred_doc, ref)


def metrics(scores, key=KEY):
    """(strict, loc, cls) P/R/F triples, for compact asserts."""
    prefix = f"spans_{key}"
    return tuple(tuple(scores[f"{prefix}{kind}_{m}"] for m in "prf") for kind in ("", "_loc", "_cls"))


def assert_metrics(scores, strict, loc, cls, key=KEY):
    for got, want in zip(metrics(scores, key), (strict, loc, cls)):
        if want is None:
            assert got == (None, None, None)
        else:
            assert got == pytest.approx(want)


def test_output_keys(vocab):
    eg = make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein")])
    scores = piqn_score([eg], spans_key=KEY)
    assert set(scores) == {
        "spans_sc_p", "spans_sc_r", "spans_sc_f", "spans_sc_per_type",
        "spans_sc_loc_p", "spans_sc_loc_r", "spans_sc_loc_f",
        "spans_sc_cls_p", "spans_sc_cls_r", "spans_sc_cls_f", "spans_sc_errors",
    }  # fmt: skip


def test_error_counts_say_what_became_of_each_prediction_and_gold_span():
    vocab = Vocab()
    words = ["a", "b", "c", "d", "e", "f", "g", "h"]
    gold = [(0, 2, "DNA"), (0, 1, "protein"), (3, 4, "RNA"), (6, 8, "DNA")]
    # (0,1,protein) correct; (0,2,RNA) right boundaries, wrong type; (3,5,RNA) overlaps (3,4) without matching it;
    # (5,6,DNA) overlaps nothing; (6,8) is overlapped by nothing: missed. (0,2) is overlapped, so not missed.
    pred = [(0, 1, "protein"), (0, 2, "RNA"), (3, 5, "RNA"), (5, 6, "DNA")]
    scores = piqn_score([make_example(vocab, gold, pred, words=words)])
    assert scores["spans_sc_errors"] == {
        "correct": 1, "wrong_type": 1, "wrong_boundaries": 1, "spurious": 1, "missed": 1,
    }  # fmt: skip


def test_perfect_prediction(vocab):
    # gold = pred = {(0,2,DNA), (0,1,protein)}: everything is 2/2.
    spans = [(0, 2, "DNA"), (0, 1, "protein")]
    scores = piqn_score([make_example(vocab, spans, spans)])
    assert_metrics(scores, (1, 1, 1), (1, 1, 1), (1, 1, 1))
    assert scores["spans_sc_per_type"] == {
        "DNA": pytest.approx({"p": 1, "r": 1, "f": 1}),
        "protein": pytest.approx({"p": 1, "r": 1, "f": 1}),
    }


def test_right_span_wrong_label(vocab):
    # gold {(0,2,DNA)}, pred {(0,2,protein)}
    # strict: tp 0, fp 1, fn 1        -> 0 / 0 / 0
    # loc:    (0,2) == (0,2)          -> 1 / 1 / 1
    # cls:    1 localized, 0 correct  -> P 0/1 = 0, R 0/1 = 0, F 0
    eg = make_example(vocab, [(0, 2, "DNA")], [(0, 2, "protein")])
    assert_metrics(piqn_score([eg]), (0, 0, 0), (1, 1, 1), (0, 0, 0))


def test_wrong_span(vocab):
    # gold {(0,2,DNA)}, pred {(1,3,DNA)}: wrong boundaries, right label.
    # strict: tp 0, fp 1, fn 1        -> 0 / 0 / 0
    # loc:    tp 0, fp 1, fn 1        -> 0 / 0 / 0
    # cls:    nothing localized, 1 gold -> P 0/0 reported 0.0 (spaCy's guard), R 0/1
    eg = make_example(vocab, [(0, 2, "DNA")], [(1, 3, "DNA")])
    assert_metrics(piqn_score([eg]), (0, 0, 0), (0, 0, 0), (0, 0, 0))


def test_three_metrics_disagree(vocab):
    # gold {(0,2,DNA), (0,1,protein)}
    # pred {(0,2,protein) wrong label, (0,1,protein) correct, (1,3,DNA) wrong span}
    # strict: tp 1, fp 2, fn 1 -> P 1/3, R 1/2, F 2*(1/3*1/2)/(1/3+1/2) = 0.4
    # loc:    bounds {(0,2),(0,1),(1,3)} vs {(0,2),(0,1)} -> tp 2, fp 1, fn 0
    #         -> P 2/3, R 1, F 0.8
    # cls:    localized {(0,2,protein), (0,1,protein)}, correct 1
    #         -> P 1/2, R 1/2 (= strict R), F 0.5
    eg = make_example(
        vocab,
        [(0, 2, "DNA"), (0, 1, "protein")],
        [(0, 2, "protein"), (0, 1, "protein"), (1, 3, "DNA")],
    )
    scores = piqn_score([eg])
    assert_metrics(scores, (1 / 3, 1 / 2, 0.4), (2 / 3, 1, 0.8), (1 / 2, 1 / 2, 1 / 2))
    assert scores["spans_sc_cls_r"] == pytest.approx(scores["spans_sc_r"])


def test_nested_gold_only_inner_found(vocab):
    # gold {(0,2,DNA) "IL-2 gene", (0,1,protein) "IL-2"}, pred {(0,1,protein)}
    # strict: tp 1, fp 0, fn 1 -> P 1, R 1/2, F 2/3; same for loc and cls.
    eg = make_example(vocab, [(0, 2, "DNA"), (0, 1, "protein")], [(0, 1, "protein")])
    scores = piqn_score([eg])
    third = (1, 1 / 2, 2 / 3)
    assert_metrics(scores, third, third, third)
    per_type = scores["spans_sc_per_type"]
    assert per_type["protein"] == pytest.approx({"p": 1, "r": 1, "f": 1})
    # DNA: no prediction, one gold -> tp 0, fp 0, fn 1 -> all 0.0
    assert per_type["DNA"] == pytest.approx({"p": 0, "r": 0, "f": 0})


def test_duplicate_predictions_collapse(vocab):
    # gold {(0,1,protein)}
    # pred [(0,1,protein), (0,1,protein), (0,1,DNA)] -> set {(0,1,protein), (0,1,DNA)}
    # strict: tp 1, fp 1, fn 0 -> P 1/2, R 1, F 2/3
    # loc:    {(0,1)} vs {(0,1)} -> 1 / 1 / 1
    # cls:    both are localized, 1 correct -> P 1/2, R 1, F 2/3
    eg = make_example(
        vocab,
        [(0, 1, "protein")],
        [(0, 1, "protein"), (0, 1, "protein"), (0, 1, "DNA")],
    )
    assert_metrics(piqn_score([eg]), (1 / 2, 1, 2 / 3), (1, 1, 1), (1 / 2, 1, 2 / 3))


def test_gold_same_span_two_labels(vocab):
    # gold {(0,1,protein), (0,1,DNA)}, pred {(0,1,protein)}
    # strict: tp 1, fp 0, fn 1 -> P 1, R 1/2, F 2/3
    # loc:    gold collapses to {(0,1)} -> 1 / 1 / 1
    # cls:    1 localized, 1 correct, 2 gold -> P 1, R 1/2, F 2/3
    eg = make_example(vocab, [(0, 1, "protein"), (0, 1, "DNA")], [(0, 1, "protein")])
    third = (1, 1 / 2, 2 / 3)
    assert_metrics(piqn_score([eg]), third, (1, 1, 1), third)


def test_docs_without_key_are_skipped(vocab):
    # Example 1 is perfect. Example 2's reference has no "sc" group, so its two
    # (wrong) predictions are not counted: everything stays 1/1/1.
    examples = [
        make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein")]),
        make_example(vocab, MISSING, [(0, 2, "DNA"), (1, 3, "RNA")]),
    ]
    scores = piqn_score(examples)
    assert_metrics(scores, (1, 1, 1), (1, 1, 1), (1, 1, 1))
    assert set(scores["spans_sc_per_type"]) == {"protein"}


def test_prediction_without_key_counts_as_no_prediction(vocab):
    # The reference has gold {(0,1,protein)} but the predicted doc has no group:
    # tp 0, fp 0, fn 1 everywhere -> P 0.0 (guarded 0/0), R 0, F 0.
    eg = make_example(vocab, [(0, 1, "protein")], MISSING)
    assert_metrics(piqn_score([eg]), (0, 0, 0), (0, 0, 0), (0, 0, 0))


def test_empty_gold_group_counts_false_positives(vocab):
    # Example 1 is perfect: gold = pred = {(0,1,protein)}.
    # Example 2's reference has an EMPTY "sc" group and one prediction (0,2,DNA).
    # strict: tp 1, fp 1, fn 0 -> P 1/2, R 1, F 2/3 ; loc the same.
    # cls: (0,2) is not a gold span of example 2, so it is not localized -> 1 / 1 / 1
    examples = [
        make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein")]),
        make_example(vocab, [], [(0, 2, "DNA")]),
    ]
    half = (1 / 2, 1, 2 / 3)
    assert_metrics(piqn_score(examples), half, half, (1, 1, 1))


def test_empty_case_is_none(vocab):
    # No gold and no predictions anywhere: nothing to score, every value is None,
    # as spaCy's Scorer.score_spans reports it.
    examples = [
        make_example(vocab, [], []),
        make_example(vocab, MISSING, MISSING),
    ]
    for scores in (piqn_score(examples), piqn_score([])):
        assert scores["spans_sc_per_type"] is None
        assert_metrics(scores, None, None, None)


def test_predictions_without_gold(vocab):
    # Empty gold group, one prediction: strict and loc follow spaCy
    # (tp 0, fp 1, fn 0 -> P 0, R 0/0 guarded to 0.0, F 0). Classification has
    # no gold span to localize against and no gold to recall, so it is None.
    eg = make_example(vocab, [], [(0, 1, "protein")])
    assert_metrics(piqn_score([eg]), (0, 0, 0), (0, 0, 0), None)


def test_alignment_coarser_reference(vocab):
    # Reference tokens: IL-2 | gene | expression
    # Predicted tokens: IL | - | 2 | gene | expression   (same text)
    # gold {(0,1,protein) "IL-2", (0,2,DNA) "IL-2 gene"}
    # pred on predicted tokens, and where each lands on reference tokens:
    #   (0,3,protein) "IL-2"      -> (0,1,protein)  correct
    #   (0,4,DNA)     "IL-2 gene" -> (0,2,DNA)      correct
    #   (3,4,protein) "gene"      -> (1,2,protein)  wrong span
    #   (0,1,protein) "IL"        -> no whole reference token: dropped, not counted
    # strict: tp 2, fp 1, fn 0 -> P 2/3, R 1, F 0.8 ; loc the same.
    # cls: localized {(0,1,protein), (0,2,DNA)}, both correct -> 1 / 1 / 1
    eg = make_example(
        vocab,
        [(0, 1, "protein"), (0, 2, "DNA")],
        [(0, 3, "protein"), (0, 4, "DNA"), (3, 4, "protein"), (0, 1, "protein")],
        pred_words=["IL", "-", "2", "gene", "expression"],
        pred_spaces=[False, False, True, True, True],
    )
    assert eg.predicted.text == eg.reference.text
    two_thirds = (2 / 3, 1, 0.8)
    assert_metrics(piqn_score([eg]), two_thirds, two_thirds, (1, 1, 1))


def test_alignment_finer_reference(vocab):
    # Reference tokens: IL | - | 2 | gene    Predicted tokens: IL-2 | gene
    # gold {(0,3,protein) "IL-2", (0,4,DNA) "IL-2 gene"}
    # pred (0,1,protein) "IL-2" -> (0,3,protein); nothing else.
    # strict/loc/cls: tp 1, fp 0, fn 1 -> P 1, R 1/2, F 2/3
    eg = make_example(
        vocab,
        [(0, 3, "protein"), (0, 4, "DNA")],
        [(0, 1, "protein")],
        words=["IL", "-", "2", "gene"],
        pred_words=["IL-2", "gene"],
        pred_spaces=[True, True],
    )
    third = (1, 1 / 2, 2 / 3)
    assert_metrics(piqn_score([eg]), third, third, third)


def test_micro_average_over_docs(vocab):
    # Example 1: gold {(0,1,protein)}, pred {(0,1,protein)}         tp 1
    # Example 2: gold {(0,2,DNA), (0,1,protein)}, pred {(0,2,RNA)}  fn 2, fp 1
    # strict: tp 1, fp 1, fn 2 -> P 1/2, R 1/3, F 0.4
    #   (a macro average over docs would give R (1 + 0) / 2 = 1/2)
    # loc: tp 2 ((0,1) in ex 1, (0,2) in ex 2), fp 0, fn 1 -> P 1, R 2/3, F 0.8
    # cls: localized 2 (one per doc), correct 1 -> P 1/2, R 1/3, F 0.4
    examples = [
        make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein")]),
        make_example(vocab, [(0, 2, "DNA"), (0, 1, "protein")], [(0, 2, "RNA")]),
    ]
    strict = (1 / 2, 1 / 3, 0.4)
    assert_metrics(piqn_score(examples), strict, (1, 2 / 3, 0.8), strict)


def test_strict_part_matches_spancat_score(vocab):
    examples = [
        make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein"), (1, 2, "DNA")]),
        make_example(vocab, [(0, 2, "DNA"), (0, 1, "protein")], [(0, 2, "RNA")]),
        make_example(vocab, [], [(0, 1, "protein")]),
        make_example(vocab, MISSING, [(0, 1, "protein")]),
    ]
    ours = piqn_score(examples, spans_key=KEY)
    theirs = spancat_score(examples, spans_key=KEY)
    assert theirs == {k: ours[k] for k in theirs}


def test_spans_key_and_extra_cfg(vocab):
    # The component passes its whole cfg; unknown keys are ignored and the
    # spans_key chooses both the doc.spans group and the key prefix.
    key = "genia"
    eg = make_example(vocab, [(0, 1, "protein")], [(0, 1, "protein")], key=key)
    scores = piqn_score(iter([eg]), spans_key=key, labels=["protein", "DNA"], threshold=0.5, max_positive=None)
    assert_metrics(scores, (1, 1, 1), (1, 1, 1), (1, 1, 1), key=key)
    assert not any(k.startswith("spans_sc") for k in scores)
    # The same docs scored under another key have no annotation at all.
    assert_metrics(piqn_score([eg], spans_key="sc"), None, None, None)


def test_registered_scorer_resolves():
    scorer = spacy.registry.scorers.get("spacy-piqn.piqn_scorer.v1")()
    assert scorer is piqn_score
    assert make_piqn_scorer() is piqn_score
    resolved = spacy.registry.resolve({"scorer": {"@scorers": "spacy-piqn.piqn_scorer.v1"}})
    assert resolved["scorer"] is piqn_score
