"""bench/run_bench.py: ``breakdown``'s counts by span length and seen / unseen; ``raw``'s text as written;
the dirty flag; the updates a row reports."""

import subprocess
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


def test_a_rewritten_plot_does_not_mark_the_commit_dirty(tmp_path, monkeypatch):
    """Every run rewrites bench/f1_over_time.png (tracked); the runs after it are still of a clean tree."""

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "f1_over_time.png").write_bytes(b"plot")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(run_bench, "REPO", tmp_path)
    monkeypatch.setattr(run_bench, "DEFAULT_PLOT", tmp_path / "bench" / "f1_over_time.png")
    assert run_bench.git_commit()[1] is False
    (tmp_path / "bench" / "f1_over_time.png").write_bytes(b"another plot")
    assert run_bench.git_commit()[1] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert run_bench.git_commit()[1] is True


def test_a_row_counts_the_updates_of_the_configs_max_steps_not_the_budgets(tmp_path):
    budget = run_bench.Budget(max_steps=1000, wall_s=3600, eval_frequency=250)
    overrides = [("piqn", "training.max_steps", 500)]
    path = run_bench.write_run_config(
        "piqn", "tok2vec", "genia", budget, tmp_path / "train.spacy", tmp_path / "dev.spacy", tmp_path, None, None,
        overrides,
    )  # fmt: skip
    config = spacy.util.load_config(path, interpolate=True)
    # The schedule stays sized to the budget; training stops at the override.
    assert config["training"]["optimizer"]["learn_rate"]["total_steps"] == 1000
    max_steps = config["training"]["max_steps"]
    assert run_bench.stop_point([], None, False, max_steps) == (501, "max_steps")
    evals = [{"step": 0}, {"step": 250}]
    assert run_bench.stop_point(evals, {"steps": 312}, False, max_steps) == (312, "wall_s")
    assert run_bench.stop_point(evals, None, True, max_steps) == (250, "killed")
