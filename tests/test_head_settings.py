"""The head's switches: pointer type and fusion, anchor prior, weight averages, shipped configs."""

import json
from pathlib import Path

import pytest
import spacy
import torch
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import load_config, load_model_from_config
from thinc.api import Adam, fix_random_seed
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from spacy_piqn.layers.torch_head import head_settings
from spacy_piqn.settings import HeadSettings
from spacy_piqn.torch_modules.common import unpacked_bilstm
from spacy_piqn.torch_modules.head import PIQNHead, anchor_prior

from .conftest import NESTED_DATA, REPO, SHARED_DATA, TINY_PIQN, make_examples, train_tiny

CONFIGS = sorted((REPO / "configs").glob("*.cfg"))


def _first_head_weights(nlp):
    module = nlp.get_pipe("piqn").model.get_ref("head").layers[0].shims[0]._model
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_add_pipe_default_equals_an_explicit_architecture_block():
    """The factory's default config and a block naming spacy-piqn.PIQN.v1 with only its
    required arguments build the same model (the defaults live in one place)."""
    default = spacy.blank("en")
    default.add_pipe("piqn")
    model_cfg = default.config["components"]["piqn"]["model"]
    minimal = {
        "@architectures": "spacy-piqn.PIQN.v1",
        "tok2vec": model_cfg["tok2vec"],
        "windows": model_cfg["windows"],
    }
    explicit = spacy.blank("en")
    explicit.add_pipe("piqn", config={"model": minimal})
    settings = head_settings(default.get_pipe("piqn").model.get_ref("head"))
    assert settings == head_settings(explicit.get_pipe("piqn").model.get_ref("head"))
    assert settings == HeadSettings()
    # Same seed, same data: the same weights.
    weights = []
    for nlp in (default, explicit):
        fix_random_seed(0)
        examples = make_examples(nlp, NESTED_DATA)
        nlp.initialize(lambda examples=examples: examples)
        weights.append(_first_head_weights(nlp))
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_anchor_prior_points_each_query_at_its_part_of_the_window():
    mask = torch.tensor([[True] * 10, [True] * 5 + [False] * 5])
    bias = anchor_prior(mask, n_queries=10, strength=8.0)
    assert bias.shape == (2, 10, 10)
    assert torch.all(bias <= 0)
    # Query i of 10 peaks at relative position (i + 0.5) / 10: word i of 10 ...
    assert bias[0].argmax(-1).tolist() == list(range(10))
    # ... and, in a window of 5 real words, at the word covering that position.
    assert bias[1, :, :5].argmax(-1).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize("layers", [1, 2])
def test_cpu_bilstm_matches_packed_sequences_in_outputs_and_gradients(layers):
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 4, num_layers=layers, bidirectional=True, batch_first=True)
    lengths = torch.tensor([5, 2, 7])
    padded = torch.randn(3, 7, 6).masked_fill(torch.arange(7)[None, :, None] >= lengths[:, None, None], 0.0)
    weights = torch.randn(3, 7, 8)

    def run(fn):
        lstm.zero_grad()
        x = padded.clone().requires_grad_()
        out = fn(x)
        (out * weights).sum().backward()
        return out.detach(), x.grad, [p.grad.clone() for p in lstm.parameters()]

    def packed(x):
        seq = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(lstm(seq)[0], batch_first=True, total_length=7)[0]

    lstm.eval()  # no dropout between the two layers, so both runs are deterministic
    expected, ours = run(packed), run(lambda x: unpacked_bilstm(lstm, x, lengths))
    torch.testing.assert_close(ours[0], expected[0])
    torch.testing.assert_close(ours[1], expected[1])
    for got, want in zip(ours[2], expected[2]):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("pointer", ["softmax", "sigmoid"])
@pytest.mark.parametrize("fusion", ["additive", "bilinear"])
def test_pointer_variants_give_boundary_logits_over_real_words(pointer, fusion):
    torch.manual_seed(0)
    settings = HeadSettings(width=16, n_queries=4, n_layers=2, n_heads=2, pointer=pointer, pointer_fusion=fusion)
    head = PIQNHead(8, 3, settings).eval()
    windows = [torch.randn(6, 8), torch.randn(3, 8)]
    left, right, classes, dense = head(windows, all_layers=True)
    assert left.shape == right.shape == (2, 2, 4, 6) and classes.shape == (2, 2, 4, 3)
    assert dense.shape == (2, 6, 0)  # no dense boundary head unless asked for
    # Padded words can never be a boundary.
    assert torch.softmax(left[-1, 1], -1)[:, 3:].max() < 1e-6
    assert torch.isfinite(classes).all()


def test_invalid_head_settings_are_clear_errors():
    with pytest.raises(ValueError, match="pointer must be one of"):
        HeadSettings(pointer="argmax")
    with pytest.raises(ValueError, match="pointer_fusion"):
        HeadSettings(pointer_fusion="concat")
    with pytest.raises(ValueError, match="anchor_strength"):
        HeadSettings(anchor_strength=-1.0)


def test_weight_averages_reach_the_torch_head():
    """With use_averages, spaCy evaluates and saves inside nlp.use_params(optimizer.averages);
    the torch head must then run on the averaged weights and get its own back afterwards."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=TINY_PIQN)
    examples = make_examples(nlp, NESTED_DATA)
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01, use_averages=True)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    own = _first_head_weights(nlp)
    with nlp.use_params(optimizer.averages):
        averaged = _first_head_weights(nlp)
    assert any(not torch.equal(own[k], averaged[k]) for k in own)
    restored = _first_head_weights(nlp)
    assert all(torch.equal(own[k], restored[k]) for k in own)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_build(path: Path):
    config = load_config(path, overrides={"paths.train": "train.spacy", "paths.dev": "dev.spacy"})
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    assert "piqn" in nlp.pipe_names


def test_paper_config_keeps_the_paper_head():
    config = load_config(REPO / "configs" / "piqn_paper.cfg")
    model = config["components"]["piqn"]["model"]
    assert model["pointer"] == "sigmoid" and model["anchor_strength"] == 0.0
    assert model["pointer_fusion"] == "additive"


def _genia_nested_sentences(n: int):
    rows = []
    with (SHARED_DATA / "genia" / "train.jsonl").open(encoding="utf8") as f:
        for line in f:
            row = json.loads(line)
            ents = [(e["start"], e["end"]) for e in row["entities"]]
            nested = any(a != b and a[0] <= b[0] and b[1] <= a[1] for a in ents for b in ents)
            if nested and len(row["tokens"]) <= 40:
                rows.append(row)
            if len(rows) == n:
                return rows
    return rows


@pytest.mark.skipif(not (SHARED_DATA / "genia").exists(), reason="needs ../shared/data/genia")
def test_default_pipe_memorises_twelve_nested_genia_sentences():
    """The default add_pipe("piqn") (full-size head, thinc's default Adam at 1e-3) learns 12
    nested GENIA sentences within 60 updates. Deterministic: fixed seed, one torch thread.
    Measured after 60 updates: F 1.000 / 1.000 / 1.000 with seeds 0 / 1 / 2 (0.953 / 0.953 / 0.943
    before merge_keep_ratio, when every same-label nest sharing a boundary was merged away); the
    paper's head (configs/piqn_paper.cfg settings): F 0.0 (seed 0). The run is deterministic and
    does not depend on machine load; the issue's bar is 0.95."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fix_random_seed(0)
        nlp = spacy.blank("en")
        nlp.add_pipe("piqn")
        examples = []
        for row in _genia_nested_sentences(12):
            ref = Doc(nlp.vocab, words=row["tokens"])
            ref.spans["sc"] = [Span(ref, e["start"], e["end"], label=e["label"]) for e in row["entities"]]
            examples.append(Example(Doc(nlp.vocab, words=row["tokens"]), ref))
        assert len(examples) == 12
        optimizer = nlp.initialize(lambda: examples)
        for _ in range(60):
            nlp.update(examples, sgd=optimizer)
        assert nlp.evaluate(examples)["spans_sc_f"] >= 0.95
    finally:
        torch.set_num_threads(threads)


def test_dense_boundary_head_trains_and_round_trips(tmp_path):
    """The switch builds, trains (gradient reaches the dense logits), and a saved pipeline
    predicts the same spans."""
    import copy

    config = copy.deepcopy(TINY_PIQN)
    config["model"]["dense_boundaries"] = True
    nlp, examples = train_tiny(steps=50, config=config)
    head = nlp.get_pipe("piqn").model.get_ref("head").layers[0].shims[0]._model
    assert head.dense is not None and head.dense.weight.abs().sum() > 0
    texts = [eg.reference.text for eg in examples]
    before = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "p")
    after = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in spacy.load(tmp_path / "p").pipe(texts)]
    assert before == after and any(before)


def test_proposal_queries_train_round_trip_and_start_at_their_proposals(tmp_path):
    """With proposal_strength the queries start at the dense head's best spans: the switch
    builds, trains, round-trips, and a strong prior puts each query's boundaries on its proposal."""
    import copy

    from spacy_piqn.torch_modules.head import top_spans

    config = copy.deepcopy(TINY_PIQN)
    config["model"]["proposal_strength"] = 0.1
    nlp, examples = train_tiny(steps=50, config=config)
    head = nlp.get_pipe("piqn").model.get_ref("head").layers[0].shims[0]._model
    assert head.dense is not None and head.proposal_in is not None
    texts = [eg.reference.text for eg in examples]
    before = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "p")
    after = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in spacy.load(tmp_path / "p").pipe(texts)]
    assert before == after and any(before)
    # A prior far stronger than the pointer's own logits: every query points at its proposal.
    head.eval()
    head.proposal_strength = 1e3
    n_in = head.lstm.input_size if head.lstm is not None else head.proj.in_features
    words = [torch.randn(9, n_in)]
    with torch.no_grad():
        left, right, _, dense = head(words)
        encoded, mask = head.encode_words(words)
        starts, ends = top_spans(dense, mask, head.n_queries)
    assert torch.equal(left[-1].argmax(-1), starts) and torch.equal(right[-1].argmax(-1), ends)
    assert (starts <= ends).all() and (ends - starts < 24).all()
    with pytest.raises(ValueError, match="E046"):
        HeadSettings(proposal_strength=-1.0)


def test_component_defaults_are_the_settings_objects_defaults():
    """The factory, the component and the loss read one set of defaults (settings.py)."""
    from dataclasses import asdict

    from spacy_piqn.settings import DecodingSettings, LossSettings

    pipe = spacy.blank("en").add_pipe("piqn")
    expected = {**asdict(LossSettings()), **asdict(DecodingSettings())}
    assert {key: pipe.cfg[key] for key in expected} == expected
    assert LossSettings.from_cfg(pipe.cfg) == LossSettings()
    # A saved pipeline from before loss_dense_weight existed reads the default.
    old_cfg = {k: v for k, v in pipe.cfg.items() if k != "loss_dense_weight"}
    assert LossSettings.from_cfg(old_cfg).loss_dense_weight == LossSettings().loss_dense_weight
