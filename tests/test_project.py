"""The spaCy project (project.yml) runs end to end, and its GENIA preprocessing follows the stated rules.

The workflows run in a temporary copy of the project files, so the repository gets no corpus/, training/,
metrics/ or visuals/ output. Torch runs with one thread there (OMP_NUM_THREADS=1): these models are too small to gain
from more, and more threads would compete with the test process and other jobs for the cores.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import srsly
from weasel.util import load_project_config

REPO = Path(__file__).resolve().parents[1]
# The shared datasets lie beside the repository (or beside the folder of its worktrees).
SHARED_GENIA = next((p / "shared" / "data" / "genia" for p in REPO.parents if (p / "shared" / "data").is_dir()), REPO)
# The project's files, and spacy-piqn's sources and LICENSE, which its `package` step builds and ships.
PROJECT_FILES = (
    "project.yml",
    "configs",
    "scripts",
    "LICENSE",
    "README.md",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "spacy_piqn",
)


def copy_project(tmp_path: Path) -> Path:
    """The project files and the bundled sample, without any of the repository's outputs."""
    root = tmp_path / "project"
    root.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, root / name)
    shutil.copytree(REPO / "assets" / "sample", root / "assets" / "sample")
    return root


def run_project(root: Path, *args: str, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", *args],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert result.returncode == 0, f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    return result


def assert_scores(metrics_path: Path, model: Path, dev: Path) -> None:
    """The metrics file holds what the trained pipeline scores on the dev set: strict, localization and
    classification P/R/F and the per-type scores, on the dev set's gold tokens."""
    import spacy

    from spacy_piqn.cli import gold_token_examples

    saved = srsly.read_json(metrics_path)
    nlp = spacy.load(model)
    scores = nlp.evaluate(gold_token_examples(nlp, dev))
    for kind in ("", "_loc", "_cls"):
        for metric in "prf":
            key = f"spans_sc{kind}_{metric}"
            assert isinstance(scores[key], float) and saved[key] == pytest.approx(scores[key]), key
    assert saved["spans_sc_per_type"].keys() == scores["spans_sc_per_type"].keys()
    for label, prf in scores["spans_sc_per_type"].items():
        assert saved["spans_sc_per_type"][label] == pytest.approx(prf), label


# ---------------------------------------------------------------------------------------------------------
# project.yml


def test_project_file_is_consistent(tmp_path):
    """Every workflow step is a command, vars interpolate, and the sample's MD5 checksums are current."""
    config = load_project_config(copy_project(tmp_path), overrides={"vars.dataset": "conll03"})
    commands = {command["name"]: command for command in config["commands"]}
    assert set(config["workflows"]) >= {"all", "smoke", "conll03", "all-trf"}
    # A clone with only the repository: `all` makes its data first (from the downloaded GENIA release).
    assert config["workflows"]["all"][0] == config["workflows"]["all-trf"][0] == "data"
    assert config["vars"]["data_dir"] == "assets/data"
    for workflow, steps in config["workflows"].items():
        assert set(steps) <= set(commands), workflow
    assert "package" not in config["workflows"]["smoke"]
    assert config["vars"]["package_name"] == "piqn_conll03"
    assert "--name piqn_conll03" in commands["package"]["script"][0]
    for asset in config["assets"]:
        if "url" not in asset:
            path = REPO / asset["dest"]
            assert hashlib.md5(path.read_bytes()).hexdigest() == asset["checksum"], asset["dest"]
    for asset in config["assets"]:
        if "url" in asset:  # downloads are pinned by commit and checked by MD5
            assert re.fullmatch(r"[0-9a-f]{32}", asset["checksum"]), asset["dest"]
        if asset["dest"].startswith("assets/conll03/"):
            assert asset["extra"] is True and "research use only" in asset["description"].lower()
    genia_script = load_genia_script()
    assert genia_script.GENIA_302_SHA256 in commands["preprocess-genia"]["script"][0]
    genia_asset = next(a for a in config["assets"] if a["dest"].endswith("GENIAcorpus3.02.tgz"))
    assert genia_script.GENIA_302_SHA256 in genia_asset["description"]
    assert "2cd9b65a9ed462ffa40116f5df4231ae708952e8" in genia_asset["url"]


@pytest.mark.parametrize(
    "workflow, lang, expected",
    [
        (
            "conll03",
            "en",
            {
                "piqn.decoding": "flat",
                "piqn.model.windows.size": 128,
                "piqn.model.windows.stride": 96,
                "piqn.model.head.word_tagger": True,
                "piqn.loss_tag_weight": 4,
            },
        ),
        (
            "germeval2014",
            "de",
            {
                "piqn.label_smoothing": 0.2,
                "piqn.iou_class_target": 1.0,
                "piqn.class_threshold": 0.4,
                "piqn.model.windows.size": 128,
                "piqn.model.windows.predict_size": 128,
                "piqn.model.windows.context": 0,
                "tok2vec.model.embed.rows": [10000, 2000, 5000, 5000],
                "training.optimizer.L2": 0.2,
                "piqn.model.head.hidden_width": 128,
                "piqn.model.head.classifier_dropout": 0.7,
                "tok2vec.model.encode.depth": 2,
            },
        ),
    ],
)
def test_dataset_workflows_train_their_measured_recipe(tmp_path, workflow, lang, expected):
    """A dataset's workflow trains with the settings its bench rows measured, each overriding a key the config has,
    in the language given as --vars.lang, whose prefix the package step then uses."""
    from spacy.cli._util import parse_config_overrides
    from spacy.util import load_config, load_model_from_config

    config = load_project_config(copy_project(tmp_path), overrides={"vars.dataset": workflow, "vars.lang": lang})
    commands = {command["name"]: command for command in config["commands"]}
    (train,) = [step for step in config["workflows"][workflow] if step.startswith("train")]
    assert train == f"train-{workflow}"
    assert commands[train]["outputs"] == commands["train"]["outputs"]  # evaluate and package read the same model
    args = shlex.split(commands[train]["script"][0])  # as spacy project splits it
    config_args = [
        arg
        for i, option in enumerate(args[:-1])
        if option.startswith("--") and "." in option
        for arg in args[i : i + 2]
    ]
    overrides = parse_config_overrides(config_args)  # --paths.*, --nlp.lang, --components.*; not --output or --gpu-id
    # Built with validation: a key the factory or architecture does not take fails here, not silently in training.
    config = load_config(REPO / "configs" / "piqn_tok2vec.cfg", overrides=overrides)
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    assert nlp.lang == lang
    # German abbreviations stay one token (English splits "bzw." and reads "im" as "I'm").
    assert [t.text for t in nlp.make_doc("bzw. im")] == (["bzw.", "im"] if lang == "de" else ["bzw", ".", "i", "m"])
    # GermEval keeps words joined by a slash whole, CoNLL-03 splits them (the configs' rule).
    assert len(nlp.make_doc("km/h")) == (1 if workflow == "germeval2014" else 3)
    # GermEval's training docs are single sentences: no senter to learn their boundaries.
    assert ("senter" in nlp.pipe_names) == (workflow != "germeval2014")
    package_output = commands["package"]["outputs"][0]
    assert package_output.startswith(f"packages/{lang}_piqn_{workflow}-")
    trained = nlp.config["components"]
    for dotted, value in expected.items():
        section = nlp.config if dotted.startswith("training.") else trained
        for key in dotted.split("."):
            section = section[key]
        assert section == (pytest.approx(value) if isinstance(value, float) else value), dotted


def test_smoke_workflow(tmp_path):
    """`spacy project run smoke` converts the sample, trains, evaluates and renders on CPU."""
    root = copy_project(tmp_path)
    run_project(root, "smoke", ".")
    for output in ("corpus/sample/train.spacy", "corpus/sample/dev.spacy", "training/sample/smoke/model-best"):
        assert (root / output).exists(), output
    model_best = root / "training" / "sample" / "smoke" / "model-best"
    assert_scores(root / "metrics" / "sample-smoke.json", model_best, root / "corpus" / "sample" / "dev.spacy")
    html = (root / "visuals" / "sample-smoke.html").read_text(encoding="utf-8")
    assert html.count('class="spans"') == 24  # 12 dev docs, predicted and gold
    assert "doc 0: gold (5 spans)" in html

    # A second run has nothing to do.
    again = run_project(root, "smoke", ".")
    assert again.stdout.count("nothing changed") == 4


@pytest.mark.slow
def test_all_workflow_on_the_sample_with_data_dir(tmp_path):
    """The main workflow (convert -> train -> evaluate -> package) with --vars.data_dir, as CI runs it on the
    shared datasets, here on the bundled sample for speed; then `visualize`."""
    root = copy_project(tmp_path)
    data_dir = tmp_path / "data"
    shutil.copytree(REPO / "assets" / "sample", data_dir / "sample", ignore=shutil.ignore_patterns("*.md", "*.iob"))
    overrides = [
        f"--vars.data_dir={data_dir}",
        "--vars.dataset=sample",
        "--vars.max_steps=4",
        "--vars.eval_frequency=2",
        "--vars.visualize_limit=3",
    ]
    run_project(root, "all", ".", *overrides)
    run_project(root, "visualize", ".", *overrides)
    model_best = root / "training" / "sample" / "piqn_tok2vec" / "model-best"
    assert_scores(root / "metrics" / "sample-piqn_tok2vec.json", model_best, root / "corpus" / "sample" / "dev.spacy")
    sdist = root / "packages" / "en_piqn_sample-0.1.0" / "dist" / "en_piqn_sample-0.1.0.tar.gz"
    assert sdist.is_file()
    assert len(list(sdist.parent.glob("spacy_piqn-*.whl"))) == 1
    meta = srsly.read_json(root / "packages" / "en_piqn_sample-0.1.0" / "meta.json")
    assert any(requirement.startswith("spacy-piqn") for requirement in meta["requirements"])
    html = (root / "visuals" / "sample-piqn_tok2vec.html").read_text(encoding="utf-8")
    assert html.count('class="spans"') == 6


# ---------------------------------------------------------------------------------------------------------
# scripts/genia_xml_to_jsonl.py on a synthetic corpus in the GENIA 3.02 XML layout

GENIA_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE set SYSTEM "gpml.merged.dtd">
<set>
<import resource="GENIAontology.daml" prefix="G"></import>
<article>
<articleinfo><bibliomisc>MEDLINE:1</bibliomisc></articleinfo>
<title><sentence>The <cons lex="IL-2_gene" sem="G#DNA_domain_or_region"><cons lex="IL-2" \
sem="G#protein_molecule">IL-2</cons> gene</cons> of <cons lex="T_cell" sem="G#cell_type">T cells</cons>.\
</sentence></title>
<abstract>
<sentence>Weights of 30 <cons lex="dalton" sem="G#other_name">daltons</cons>. were found in \
<cons lex="Jurkat_cell" sem="G#cell_line">Jurkat cells</cons></sentence>
<sentence>Both <cons lex="(AND alpha_chain beta_chain)" sem="(AND G#protein_subunit G#protein_subunit)">\
<cons lex="alpha*">alpha</cons> and <cons lex="beta*"><cons lex="beta" sem="G#protein_subunit">beta</cons></cons> \
<cons lex="*chain">chains</cons></cons> bind.</sentence>
<sentence><cons lex="c-fos_mRNA" sem="G#RNA_molecule"><cons lex="c-fos_mRNA" sem="G#DNA_molecule">\
<cons lex="c-fos_mRNA" sem="G#DNA_molecule">c-fos mRNA</cons></cons></cons> and \
<cons lex="NF-kappaB" sem="G#protein_complex">NF-kappaB</cons>/<cons lex="Rel" sem="G#protein_family_or_group">\
Rel</cons> &amp; <cons lex="X" sem="G#DNA">X</cons></sentence>
</abstract>
</article>
<article>
<articleinfo><bibliomisc>MEDLINE:2</bibliomisc></articleinfo>
<title><sentence>No terms here .</sentence></title>
<abstract><sentence>A <cons lex="GATA-3" sem="G#protein_molecule">GATA-3</cons>-dependent <cons \
lex="promoter" sem="G#DNA_domain_or_region"> promoter </cons> .</sentence></abstract>
</article>
</set>
"""

EXPECTED_RECORDS = [
    {
        "tokens": ["The", "IL-2", "gene", "of", "T", "cells", "."],
        "entities": [
            {"start": 1, "end": 2, "label": "protein"},
            {"start": 1, "end": 3, "label": "DNA"},
            {"start": 4, "end": 6, "label": "cell_type"},
        ],
    },
    {
        # Untyped-for-us terms still cut tokens ("daltons" + "."); "Jurkat cells" ends the sentence.
        "tokens": ["Weights", "of", "30", "daltons", ".", "were", "found", "in", "Jurkat", "cells"],
        "entities": [{"start": 8, "end": 10, "label": "cell_line"}],
    },
    {
        # The coordination and its fragments are dropped; the typed term inside a fragment is kept.
        "tokens": ["Both", "alpha", "and", "beta", "chains", "bind."],
        "entities": [{"start": 3, "end": 4, "label": "protein"}],
    },
    {
        # RNA and DNA on one span: RNA wins; the duplicate DNA collapses. G#DNA (no subtype) is not mapped.
        "tokens": ["c-fos", "mRNA", "and", "NF-kappaB", "/", "Rel", "&", "X"],
        "entities": [
            {"start": 0, "end": 2, "label": "RNA"},
            {"start": 3, "end": 4, "label": "protein"},
            {"start": 5, "end": 6, "label": "protein"},
        ],
    },
    {"tokens": ["No", "terms", "here", "."], "entities": []},
    {
        # A term whose text starts and ends with spaces covers the tokens inside it.
        "tokens": ["A", "GATA-3", "-dependent", "promoter", "."],
        "entities": [{"start": 1, "end": 2, "label": "protein"}, {"start": 3, "end": 4, "label": "DNA"}],
    },
]


def load_genia_script():
    spec = importlib.util.spec_from_file_location("genia_xml_to_jsonl", REPO / "scripts" / "genia_xml_to_jsonl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_tgz(path: Path, xml: str) -> Path:
    data = xml.encode("utf-8")
    with tarfile.open(path, "w:gz") as archive:
        for name, payload in (("GENIA_term_3.02/LICENSE", b"license"), ("GENIA_term_3.02/GENIAcorpus3.02.xml", data)):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return path


def run_genia_script(*args: object) -> subprocess.CompletedProcess:
    script = REPO / "scripts" / "genia_xml_to_jsonl.py"
    command = [sys.executable, str(script), *map(str, args)]
    return subprocess.run(command, check=False, capture_output=True, text=True)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_genia_conversion_rules():
    genia = load_genia_script()
    import xml.etree.ElementTree as ET

    root = ET.fromstring(GENIA_XML.encode("utf-8"))
    records = [genia.sentence_record(sentence) for sentence in root.iter("sentence")]
    assert records == EXPECTED_RECORDS


@pytest.mark.parametrize("label,sem", [("DNA", "G#DNA_family_or_group"), ("RNA", "G#RNA_N/A"),
                                       ("protein", "G#protein_complex"), ("cell_line", "G#cell_line"),
                                       ("cell_type", "G#cell_type"), (None, "G#cell_component"),
                                       (None, "G#other_name"), (None, "(OR G#DNA_molecule G#DNA_molecule)"),
                                       (None, None), (None, "G#DNA")])  # fmt: skip
def test_genia_type_mapping(label, sem):
    assert load_genia_script().genia_label(sem) == label


def test_genia_script_splits_and_checks_sha256(tmp_path):
    tgz = write_tgz(tmp_path / "GENIAcorpus3.02.tgz", GENIA_XML)
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    out = tmp_path / "genia"
    sizes = ["--test-size", "2", "--dev-size", "1"]
    result = run_genia_script(tgz, out, "--sha256", digest, *sizes)
    assert result.returncode == 0, result.stderr
    # Corpus order, cut from the end: test = the last 2 sentences, dev = the one before, train = the rest.
    assert read_jsonl(out / "train.jsonl") == EXPECTED_RECORDS[:3]
    assert read_jsonl(out / "dev.jsonl") == EXPECTED_RECORDS[3:4]
    assert read_jsonl(out / "test.jsonl") == EXPECTED_RECORDS[4:]
    # Beside each split, the MEDLINE id of every sentence's article (line i: sentence i).
    assert (out / "train.doc_ids.txt").read_text(encoding="utf-8") == "MEDLINE:1\n" * 3
    assert (out / "dev.doc_ids.txt").read_text(encoding="utf-8") == "MEDLINE:1\n"
    assert (out / "test.doc_ids.txt").read_text(encoding="utf-8") == "MEDLINE:2\n" * 2
    assert re.search(r"train:\s+3 sentences,\s+5 entities,\s+1 documents", result.stdout)

    # The extracted XML gives the same files.
    xml_path = tmp_path / "GENIAcorpus3.02.xml"
    xml_path.write_text(GENIA_XML, encoding="utf-8")
    assert run_genia_script(xml_path, tmp_path / "from_xml", *sizes).returncode == 0
    for name in ("test.jsonl", "test.doc_ids.txt"):
        assert (tmp_path / "from_xml" / name).read_bytes() == (out / name).read_bytes()

    wrong = run_genia_script(tgz, tmp_path / "bad", "--sha256", "0" * 64)
    assert wrong.returncode == 1
    assert f"sha256 of {tgz} is {digest}" in wrong.stderr
    assert not (tmp_path / "bad").exists()


def test_genia_output_converts_to_docbin(tmp_path):
    """What the script writes is what `python -m spacy_piqn convert` (the project's `convert`) reads: one doc per
    article, found through the doc-id file beside the JSONL."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_piqn.convert import convert

    tgz = write_tgz(tmp_path / "GENIAcorpus3.02.tgz", GENIA_XML)
    assert run_genia_script(tgz, tmp_path / "genia", "--test-size", "1", "--dev-size", "1").returncode == 0
    report = convert(tmp_path / "genia" / "train.jsonl", tmp_path / "train.spacy")
    assert report["documents_from"].endswith("train.doc_ids.txt (found beside the input)")
    assert (report["docs_written"], report["sentences_written"], report["entities_written"]) == (1, 4, 8)
    (doc,) = DocBin().from_disk(tmp_path / "train.spacy").get_docs(spacy.blank("en").vocab)
    assert doc.user_data["doc_id"] == "MEDLINE:1" and [s.start for s in doc.sents] == [0, 7, 17, 23]
    assert [(s.start, s.end, s.label_) for s in doc.spans["sc"]][:4] == [
        (1, 2, "protein"),
        (1, 3, "DNA"),
        (4, 6, "cell_type"),
        (15, 17, "cell_line"),  # "Jurkat cells", tokens 8-10 of the second sentence
    ]


# ---------------------------------------------------------------------------------------------------------
# The `data` step of `all`: a clone with only the repository builds GENIA from the downloaded release; a data_dir
# that holds the JSONL already (../shared/data in CI) is used as it is.

GENIA_TGZ = Path("assets") / "genia" / "GENIAcorpus3.02.tgz"


def run_prepare_data(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "scripts" / "prepare_data.py"), *map(str, args)]
    return subprocess.run(command, check=False, capture_output=True, text=True, cwd=cwd)


def test_data_step_uses_existing_jsonl_as_it_is(tmp_path):
    root = copy_project(tmp_path)
    data_dir = tmp_path / "shared" / "data"
    shutil.copytree(REPO / "assets" / "sample", data_dir / "genia", ignore=shutil.ignore_patterns("*.md", "*.iob"))
    before = {path.name: path.read_bytes() for path in (data_dir / "genia").iterdir()}
    first = run_project(root, "data", ".", f"--vars.data_dir={data_dir}")
    assert f"Using {data_dir / 'genia' / 'train.jsonl'}" in first.stdout
    assert {path.name: path.read_bytes() for path in (data_dir / "genia").iterdir()} == before
    assert "nothing changed" in run_project(root, "data", ".", f"--vars.data_dir={data_dir}").stdout


def test_data_step_without_data_or_release_says_what_to_run(tmp_path):
    root = copy_project(tmp_path)
    result = run_project(root, "all", ".", check=False)
    assert result.returncode != 0
    assert "no assets/data/genia/train.jsonl and no assets/genia/GENIAcorpus3.02.tgz" in result.stderr
    assert "python -m spacy project assets ." in result.stderr and "--vars.data_dir" in result.stderr
    assert not (root / "corpus" / "genia").exists()  # stopped before convert

    other = run_prepare_data("assets/data", "germeval2014", cwd=root)
    assert other.returncode == 1 and "Put germeval2014/train.jsonl and dev.jsonl" in other.stderr
    (root / "assets" / "data" / "germeval2014").mkdir(parents=True)
    (root / "assets" / "data" / "germeval2014" / "train.jsonl").write_text("", encoding="utf-8")
    half = run_prepare_data("assets/data", "germeval2014", cwd=root)
    assert half.returncode == 1 and "dev.jsonl does not" in half.stderr


def test_data_step_builds_genia_from_the_release(tmp_path):
    """In a fresh clone `all` starts with `data`, which reads assets/genia/GENIAcorpus3.02.tgz, refuses a file that is
    not the 3.02 release (sha256), and otherwise writes the split that `convert` reads."""
    root = copy_project(tmp_path)
    (root / GENIA_TGZ).parent.mkdir(parents=True)
    tgz = write_tgz(root / GENIA_TGZ, GENIA_XML)
    refused = run_project(root, "data", ".", check=False)
    assert refused.returncode != 0
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    assert f"sha256 of {GENIA_TGZ} is {digest}, expected {load_genia_script().GENIA_302_SHA256}" in refused.stderr
    assert not (root / "assets" / "data" / "genia").exists()

    # The same step on the synthetic corpus, with its own sha256 and split sizes.
    sizes = ["--test-size", "2", "--dev-size", "1"]
    built = run_prepare_data("assets/data", "genia", "--sha256", digest, *sizes, cwd=root)
    assert built.returncode == 0, built.stderr
    out = root / "assets" / "data" / "genia"
    assert read_jsonl(out / "train.jsonl") == EXPECTED_RECORDS[:3]
    assert read_jsonl(out / "dev.jsonl") == EXPECTED_RECORDS[3:4]
    assert (out / "train.doc_ids.txt").read_text(encoding="utf-8") == "MEDLINE:1\n" * 3
    # Once built, the project's step uses the files as they are.
    used = run_project(root, "data", ".").stdout
    assert "Using assets/data/genia/train.jsonl" in used
    assert "(documents from train.doc_ids.txt and dev.doc_ids.txt)" in used


def test_data_step_needs_both_doc_id_files_or_neither(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(REPO / "assets" / "sample", data_dir / "genia", ignore=shutil.ignore_patterns("*.md", "*.iob"))
    ids = data_dir / "genia" / "train.doc_ids.txt"
    ids.write_text("MEDLINE:1\n" * 40, encoding="utf-8")
    half = run_prepare_data(data_dir, "genia", cwd=tmp_path)
    assert half.returncode == 1
    assert f"{ids} exists but {data_dir / 'genia' / 'dev.doc_ids.txt'} does not" in half.stderr


@pytest.mark.skipif(
    not (REPO / GENIA_TGZ).is_file() or not (SHARED_GENIA / "train.jsonl").is_file(),
    reason="needs the downloaded release (spacy project assets) and ../shared/data/genia",
)
def test_real_genia_release_gives_the_shared_split(tmp_path):
    """The release that `spacy project assets` downloads becomes byte for byte the JSONL (and doc-id files) that CI
    trains on."""
    result = run_prepare_data(tmp_path / "data", "genia", "--genia-tgz", REPO / GENIA_TGZ, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "The counts match the published GENIA split" in result.stdout
    for name in ("train.jsonl", "dev.jsonl", "train.doc_ids.txt", "dev.doc_ids.txt"):
        assert (tmp_path / "data" / "genia" / name).read_bytes() == (SHARED_GENIA / name).read_bytes(), name


# ---------------------------------------------------------------------------------------------------------
# The CLI commands the project calls fail with a one-line reason


def test_evaluate_and_visualize_report_bad_paths(tmp_path):
    from typer.testing import CliRunner

    from spacy_piqn.cli import app

    runner = CliRunner()
    missing_model = runner.invoke(app, ["evaluate", str(tmp_path / "no-model"), str(tmp_path / "dev.spacy")])
    assert missing_model.exit_code == 1
    assert f"error: [E200] cannot load the pipeline {str(tmp_path / 'no-model')!r}" in missing_model.output
    bad_limit = runner.invoke(app, ["visualize", "m", "d.spacy", str(tmp_path / "v.html"), "--limit", "-1"])
    assert bad_limit.exit_code == 1
    assert "error: [E203] --limit must be 0 (all) or positive, got -1" in bad_limit.output
