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
from spacy_piqn.torch_modules.head import OneWayLayer, PIQNHead, anchor_prior

from .conftest import NESTED_DATA, REPO, SHARED_DATA, TINY_PIQN, make_examples

CONFIGS = sorted((REPO / "configs").glob("*.cfg"))


def _first_head_weights(nlp):
    module = nlp.get_pipe("piqn").model.get_ref("head").layers[0].shims[0]._model
    return {k: v.clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_add_pipe_default_equals_an_explicit_architecture_block(version):
    """The factory's default config, a spacy-piqn.PIQN.v2 block with an empty head block and the
    older spacy-piqn.PIQN.v1 block (head settings as its own arguments) build the same model: the
    defaults live in one place, and configs written for v1 still load."""
    default = spacy.blank("en")
    default.add_pipe("piqn")
    model_cfg = default.config["components"]["piqn"]["model"]
    minimal = {"@architectures": f"spacy-piqn.PIQN.{version}", "tok2vec": model_cfg["tok2vec"]}
    if version == "v2":
        minimal.update(windows=model_cfg["windows"], head={"@architectures": "spacy-piqn.PIQNHead.v1"})
    else:
        minimal.update(windows={"@misc": "spacy-piqn.token_windows.v1"})
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


def test_v1_block_passes_each_setting_to_its_own_head_argument():
    """A spacy-piqn.PIQN.v1 block's head_lr_scale is the head's lr_scale and its other settings land where they
    belong (by name, so that head arguments added later cannot shift them)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn")
    block = {
        "@architectures": "spacy-piqn.PIQN.v1",
        "tok2vec": nlp.config["components"]["piqn"]["model"]["tok2vec"],
        "windows": {"@misc": "spacy-piqn.token_windows.v1"},
        "head_lr_scale": 20.0,
        "n_queries": 7,
        "max_padded_words": 64,
    }
    head = spacy.blank("en").add_pipe("piqn", config={"model": block}).model.get_ref("head")
    assert head.attrs["lr_scale"] == 20.0 and head.attrs["mixed_precision"] is False
    assert head_settings(head) == HeadSettings(n_queries=7, max_padded_words=64)


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
    left, right, classes = head(windows, all_layers=True)
    assert left.shape == right.shape == (2, 2, 4, 6) and classes.shape == (2, 2, 4, 3)
    # Padded words can never be a boundary.
    assert torch.softmax(left[-1, 1], -1)[:, 3:].max() < 1e-6
    assert torch.isfinite(classes).all()


def joint_attention_reference(layer, words, queries, position, word_mask):
    """The word-level layer as PIQN's code runs it: one (n+M)×(n+M) attention over [words ; queries], queries'
    Q and K from (e + p) / 2 and V from e, with the words→queries block masked unless ``one_way`` is off and the
    queries→queries block masked without ``query_interaction``."""
    n, m = words.shape[1], queries.shape[1]
    allowed = torch.ones(words.shape[0], n + m, n + m, dtype=torch.bool)
    allowed[:, :, :n] &= word_mask[:, None, :]
    if layer.one_way:
        allowed[:, :n, n:] = False
    if not layer.query_interaction:
        allowed[:, n:, n:] = False
    hidden = torch.cat([words, queries], dim=1)
    positioned = torch.cat([words, (queries + position) / 2], dim=1)
    d = words.shape[-1] // layer.n_heads
    scores = layer._split(layer.q(positioned)) @ layer._split(layer.k(positioned)).transpose(-1, -2) / d**0.5
    context = scores.masked_fill(~allowed[:, None], float("-inf")).softmax(-1) @ layer._split(layer.v(hidden))
    hidden = layer.attn_norm(hidden + layer.out(layer._merge(context)))
    hidden = layer.ffn_norm(hidden + layer.ffn_out(torch.nn.functional.gelu(layer.ffn_in(hidden))))
    return hidden[:, :n], hidden[:, n:]


@pytest.mark.parametrize("interaction", [True, False])
@pytest.mark.parametrize("one_way", [True, False])
def test_word_level_layer_is_the_joint_masked_attention(interaction, one_way):
    torch.manual_seed(0)
    layer = OneWayLayer(16, 4, 0.0, interaction, one_way).eval()
    words, queries, position = torch.randn(2, 5, 16), torch.randn(2, 3, 16), torch.randn(3, 16)
    word_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    with torch.no_grad():
        got = layer(words, queries, position, word_mask)
        want = joint_attention_reference(layer, words, queries, position, word_mask)
    for ours, theirs in zip(got, want):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("one_way", [True, False])
def test_only_two_way_layers_let_queries_change_the_words(one_way):
    torch.manual_seed(0)
    settings = HeadSettings(width=16, n_queries=4, n_layers=2, n_heads=2, one_way=one_way)
    head = PIQNHead(8, 3, settings).eval()
    windows = [torch.randn(6, 8), torch.randn(3, 8)]
    words, mask = head.encode_words(windows)
    content, position = head.queries()
    state = content.unsqueeze(0).expand(2, -1, -1)
    with torch.no_grad():
        before, _ = head.layers[0](words, state, position, mask)
        after, _ = head.layers[0](words, state + 1.0, position, mask)
    assert torch.equal(before, after) == one_way


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"pointer_fusion": "concat"}, r"^\[E007\] pointer_fusion must be one of .*got 'concat'"),
        ({"anchor_strength": -1.0}, r"^\[E008\] anchor_strength must be >= 0, got -1.0"),
        ({"width": 31}, r"^\[E009\] hidden_width must be even"),
    ],
)
def test_invalid_head_settings_are_clear_errors(setting, message):
    """Each bad setting raises with its own code and names the setting (pointer: tests/test_errors.py)."""
    with pytest.raises(ValueError, match=message):
        HeadSettings(**setting)


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
def test_shipped_configs_build_the_head_they_list(path: Path):
    config = load_config(path, overrides={"paths.train": "train.spacy", "paths.dev": "dev.spacy"})
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    listed = load_config(path, interpolate=True)["components"]["piqn"]["model"]["head"]
    built = head_settings(nlp.get_pipe("piqn").model.get_ref("head")).to_dict()
    renamed = {"width" if key == "hidden_width" else key: value for key, value in listed.items()}
    shared = [key for key in renamed if key in built]
    assert len(shared) >= 10 and {key: built[key] for key in shared} == {key: renamed[key] for key in shared}


def test_paper_config_keeps_the_paper_head():
    config = load_config(REPO / "configs" / "piqn_paper.cfg")
    head = config["components"]["piqn"]["model"]["head"]
    assert head["pointer"] == "sigmoid" and head["anchor_strength"] == 0.0
    assert head["pointer_fusion"] == "additive"


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
    nested GENIA sentences within 60 updates. Deterministic (fixed seed, one torch thread), so it
    does not depend on machine load."""
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


def test_component_defaults_are_the_settings_objects_defaults():
    """The factory, the component and the loss read one set of defaults (settings.py)."""
    from dataclasses import asdict

    from spacy_piqn.settings import DecodingSettings, LossSettings

    pipe = spacy.blank("en").add_pipe("piqn")
    expected = {**asdict(LossSettings()), **asdict(DecodingSettings())}
    assert {key: pipe.cfg[key] for key in expected} == expected
    assert LossSettings.from_cfg(pipe.cfg) == LossSettings()
    # A saved cfg without a newer setting reads its default.
    old_cfg = {k: v for k, v in pipe.cfg.items() if k != "ordered_warmup_updates"}
    assert LossSettings.from_cfg(old_cfg).ordered_warmup_updates == LossSettings().ordered_warmup_updates


def _module(nlp):
    return nlp.get_pipe("piqn").model.get_ref("head").layers[0].shims[0]._model


def test_load_time_config_sets_run_time_head_settings_everywhere(trained_tiny, tmp_path):
    """A run-time setting given at load time reaches the head's settings and its torch module (thinc
    restores the saved attrs over the config's; the config must win)."""
    nlp, examples = trained_tiny
    nlp.to_disk(tmp_path / "p")
    override = {"dropout": 0.3, "classifier_dropout": 0.2, "max_padded_words": 1}
    loaded = spacy.load(tmp_path / "p", config={"components": {"piqn": {"model": {"head": override}}}})
    settings = head_settings(loaded.get_pipe("piqn").model.get_ref("head"))
    assert (settings.dropout, settings.classifier_dropout, settings.max_padded_words) == (0.3, 0.2, 1)
    module = _module(loaded)
    assert module.max_padded_words == 1
    assert module.layers[0].dropout.p == 0.3 and module.classifier.dropout.p == 0.2
    # Predictions do not depend on the group size (dropout is off at prediction).
    docs = [eg.predicted.text for eg in examples]
    spans = [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in nlp.pipe(docs)]
    assert spans == [[(s.start, s.end, s.label_) for s in d.spans["sc"]] for d in loaded.pipe(docs)]


@pytest.mark.parametrize(
    "override", [{"anchor_strength": 0.0}, {"n_queries": 9}, {"pointer": "sigmoid"}, {"one_way": False}]
)
def test_load_time_config_cannot_change_what_the_model_learned(trained_tiny, tmp_path, override):
    nlp, _ = trained_tiny
    nlp.to_disk(tmp_path / "p")
    key = next(iter(override))
    with pytest.raises(ValueError, match=f"E051.*{key}"):
        spacy.load(tmp_path / "p", config={"components": {"piqn": {"model": {"head": override}}}})
