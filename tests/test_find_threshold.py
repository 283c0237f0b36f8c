"""`python -m spacy_piqn find-threshold`: tunes a decoding setting on gold tokens and saves it."""

import re

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_piqn.cli import THRESHOLD_RANGES, app, best_threshold, gold_token_examples, threshold_grid

ROW = re.compile(r"^  +(\d+\.\d\d) +(\d+\.\d\d)((?:  \(current\))?)((?:  <- best)?)$")


def find_threshold(model, data, key, out, n_trials=5, pipe_cfg=None):
    """Run the command; RETURNS {value: (F in %, is current, is best)} from its table, and its output."""
    result = CliRunner().invoke(
        app, ["find-threshold", str(model), str(data), "-k", key, "-n", str(n_trials), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    table = {}
    for line in result.output.splitlines():
        match = ROW.match(line)
        if match:
            table[float(match.group(1))] = (float(match.group(2)), bool(match.group(3)), bool(match.group(4)))
    return table, result.output


@pytest.mark.parametrize("key", sorted(THRESHOLD_RANGES))
def test_find_threshold_tries_the_current_value_and_saves_the_best(trained_tiny, tmp_path, key):
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples], store_user_data=True).to_disk(tmp_path / "dev.spacy")
    current = nlp.get_pipe("piqn").cfg[key]
    out = tmp_path / f"tuned-{key}"
    table, output = find_threshold(tmp_path / "model", tmp_path / "dev.spacy", key, out)

    low, high = THRESHOLD_RANGES[key]
    assert min(table) == low and max(table) == high
    assert f"5 values from {low} to {high} and the current {float(current)}" in output
    # The current value is in the table, marked, and competes: the best is never below it, and wins a tie.
    assert [value for value, (_, is_current, _) in table.items() if is_current] == [current]
    assert len(table) == 5 + (current not in threshold_grid(key, 5, -1.0))
    (best,) = [value for value, (_, _, is_best) in table.items() if is_best]
    scores = {value: score for value, (score, _, _) in table.items()}
    assert scores[best] == max(scores.values()) >= scores[current]
    if scores[current] == scores[best]:
        assert best == current

    tuned = spacy.load(out)
    # srsly's JSON reader can return 0.95 as 0.9500000000000001: compare to 1e-9.
    value = tuned.get_pipe("piqn").cfg[key]
    assert abs(value - best) < 1e-9
    assert abs(tuned.config["components"]["piqn"][key] - value) < 1e-9
    # The saved pipeline scores what the table said, on the same gold-token examples.
    evaluated = tuned.evaluate(gold_token_examples(tuned, tmp_path / "dev.spacy"))
    assert round(evaluated["spans_sc_f"] * 100, 2) == scores[best]


def test_merge_keep_ratio_range_reaches_always_drop():
    """merge_keep_ratio > 1 drops every merged nest (a documented setting), so its grid goes past 1."""
    grid = threshold_grid("merge_keep_ratio", 5, 0.9)
    assert grid == [0.0, 0.38, 0.75, 0.9, 1.12, 1.5]
    assert threshold_grid("class_threshold", 2, 0.0) == [0.0, 0.95]


def test_best_threshold_prefers_the_current_value_on_a_tie_then_the_nearest():
    assert best_threshold({0.0: 0.5, 0.9: 0.6, 0.95: 0.6}, current=0.9) == 0.9
    assert best_threshold({0.0: 0.5, 0.9: 0.4, 0.95: 0.6}, current=0.9) == 0.95
    assert best_threshold({0.5: 0.6, 0.9: 0.4, 1.2: 0.6}, current=0.9) == 1.2


def test_find_threshold_rejects_an_unknown_key(trained_tiny, tmp_path):
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "model")
    result = CliRunner().invoke(
        app, ["find-threshold", str(tmp_path / "model"), str(tmp_path / "x.spacy"), "-k", "nope"]
    )
    assert result.exit_code == 1 and "[E204] --key must be one of" in result.output
