"""spaCy's own command-line tools work on the shipped configs and on data from `python -m spacy_piqn convert`."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    for split in ("train", "dev"):
        cmd = [sys.executable, "-m", "spacy_piqn", "convert", str(REPO / "assets" / "sample" / f"{split}.jsonl")]
        subprocess.run(cmd + [str(out / f"{split}.spacy")], check=True, capture_output=True, env=ENV)
    return out


@pytest.mark.parametrize("config", ["piqn_tok2vec.cfg", "piqn_paper.cfg"])
def test_spacy_debug_data_runs_on_the_shipped_config(config, sample_corpus):
    cmd = [sys.executable, "-m", "spacy", "debug", "data", str(REPO / "configs" / config)]
    cmd += ["--paths.train", str(sample_corpus / "train.spacy"), "--paths.dev", str(sample_corpus / "dev.spacy")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    # It exits 1 for its own data warnings (40 training docs are "too few"); a config error gives a traceback.
    assert "Pipeline can be initialized with data" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_spacy_evaluate_scores_gold_tokens_like_the_project(trained_tiny, sample_corpus, tmp_path):
    """On converted DocBins spaCy's `evaluate` predicts on docs made from the text; for these whitespace-joined
    gold tokens its strict scores equal `python -m spacy_piqn evaluate`'s."""
    nlp, _ = trained_tiny
    nlp.to_disk(tmp_path / "model")
    dev = str(sample_corpus / "dev.spacy")
    spacy_json, ours_json = tmp_path / "spacy.json", tmp_path / "ours.json"
    cmd = [sys.executable, "-m", "spacy", "evaluate", str(tmp_path / "model"), dev, "--output", str(spacy_json)]
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)
    cmd = [sys.executable, "-m", "spacy_piqn", "evaluate", str(tmp_path / "model"), dev, "--output", str(ours_json)]
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)
    theirs, ours = json.loads(spacy_json.read_text()), json.loads(ours_json.read_text())
    assert theirs["spans_sc_f"] == pytest.approx(ours["spans_sc_f"])
    assert theirs["spans_sc_p"] == pytest.approx(ours["spans_sc_p"])
