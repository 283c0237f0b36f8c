"""`python -m spacy_piqn find-threshold`: tunes a decoding threshold on gold tokens and saves it."""

import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_piqn.cli import app, gold_token_examples


def test_find_threshold_picks_the_best_value_and_saves_it(trained_tiny, tmp_path):
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples], store_user_data=True).to_disk(tmp_path / "dev.spacy")
    for key in ("class_threshold", "boundary_threshold", "merge_keep_ratio"):
        out = tmp_path / f"tuned-{key}"
        result = CliRunner().invoke(
            app,
            [
                "find-threshold",
                str(tmp_path / "model"),
                str(tmp_path / "dev.spacy"),
                "-k",
                key,
                "-n",
                "5",
                "-o",
                str(out),
            ],
        )
        assert result.exit_code == 0, result.output
        rows = [line.split() for line in result.output.splitlines() if line.startswith("  ")]
        table = {float(r[0]): float(r[1]) for r in rows}
        assert len(table) == 5 and min(table) == 0.0 and max(table) == 0.95
        best = max(table.values())
        tuned = spacy.load(out)
        # srsly's JSON reader can return 0.95 as 0.9500000000000001: compare to 1e-9.
        value = tuned.get_pipe("piqn").cfg[key]
        chosen = min(table, key=lambda v: abs(v - value))
        assert abs(chosen - value) < 1e-9 and table[chosen] == best
        assert abs(tuned.config["components"]["piqn"][key] - value) < 1e-9
        # The saved pipeline scores what the table said, on the same gold-token examples.
        scores = tuned.evaluate(gold_token_examples(tuned, tmp_path / "dev.spacy"))
        assert round(scores["spans_sc_f"] * 100, 2) == best


def test_find_threshold_rejects_an_unknown_key(trained_tiny, tmp_path):
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "model")
    result = CliRunner().invoke(
        app, ["find-threshold", str(tmp_path / "model"), str(tmp_path / "x.spacy"), "-k", "nope"]
    )
    assert result.exit_code == 1 and "[E204] --key must be one of" in result.output
