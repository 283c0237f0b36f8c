"""`python -m spacy_piqn analyze`: per-query statistics that agree with what the pipeline predicts."""

import json

import pytest
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_piqn.cli import app


def test_analyze_counts_every_query_entity_and_the_kept_ones_are_the_predicted_spans(trained_tiny, tmp_path):
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[eg.reference for eg in examples]).to_disk(tmp_path / "dev.spacy")
    pytest.importorskip("matplotlib")
    result = CliRunner().invoke(
        app, ["analyze", str(tmp_path / "model"), str(tmp_path / "dev.spacy"), str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "queries.json").read_text())
    queries = summary["queries"]
    assert summary["n_queries"] == len(queries) == 8 and summary["labels"] == list(nlp.get_pipe("piqn").labels)
    # What decoding keeps is exactly what the pipeline writes.
    predicted = nlp.pipe(eg.predicted.copy() for eg in examples)
    assert summary["kept"] == sum(len(doc.spans["sc"]) for doc in predicted) > 0
    assert summary["predicted"] == sum(q["predicted"] for q in queries) >= summary["kept"]
    for q in queries:
        assert (
            sum(q["relative_start_histogram"])
            == sum(q["length_histogram"])
            == sum(q["types"].values())
            == q["predicted"]
        )
        assert q["kept"] <= q["predicted"]
    for name in ("queries_position.png", "queries_type.png", "queries_length.png"):
        assert (tmp_path / "out" / name).read_bytes()[:4] == b"\x89PNG"
