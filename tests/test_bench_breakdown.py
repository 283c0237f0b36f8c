"""bench/run_bench.py: ``breakdown``'s counts by span length and seen / unseen; ``raw``'s text as written."""

import sys
from pathlib import Path

import spacy
from spacy.tokens import Doc, Span

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import run_bench  # noqa: E402  (standard library only at import time)


def _doc(vocab, words, spans):
    doc = Doc(vocab, words=words)
    doc.spans["sc"] = [Span(doc, start, end, label=label) for start, end, label in spans]
    return doc


def test_breakdown_counts_each_span_in_its_length_and_seen_groups():
    vocab = spacy.blank("en").vocab
    words = ["Sean", "Penn", "lives", "in", "Los", "Angeles", "now", "Berlin"]
    reference = _doc(vocab, words, [(0, 2, "PER"), (4, 6, "LOC"), (7, 8, "LOC")])
    # Right: Los Angeles and Berlin; a short end for Sean Penn; a spurious "now".
    predicted = _doc(vocab, words, [(0, 1, "PER"), (4, 6, "LOC"), (7, 8, "LOC"), (6, 7, "ORG")])
    counts = run_bench.breakdown_counts([(predicted, reference)], seen={"berlin"})
    # [correct predictions, predictions, correct gold spans, gold spans]
    assert counts["all"] == [2, 4, 2, 3]
    assert counts["1 word"] == [1, 3, 1, 1]
    assert counts["2 words"] == [1, 1, 1, 2]
    assert counts["seen"] == [1, 1, 1, 1]
    assert counts["unseen"] == [1, 3, 1, 2]
    assert "4+ words" not in counts


def test_raw_writes_gold_tokens_as_text_with_punctuation_attached():
    words = ["(", "NF-kappa", "B", ")", ".", "In", "T", "cells", ",", "IL-2", "[", "1", "]", ";", "ok"]
    doc = Doc(spacy.blank("en").vocab, words=words, spaces=run_bench.written_spaces(words))
    assert doc.text == "(NF-kappa B). In T cells, IL-2 [1]; ok"
