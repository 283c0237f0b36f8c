"""A trained piqn pipeline survives the project's `package` step: it declares spacy-piqn, carries its data's license,
installs, loads and predicts the same.

The default tests install the package with --no-deps --no-index into a fresh virtual environment that sees the
packages of the environment running the tests (so torch and spacy-piqn are not installed again, and nothing is
downloaded). The slow test runs the project's `package` command and installs its output, spacy-piqn's wheel
included, into a brand-new virtual environment from the package index, as a user would. Both load the pipeline by
name in a fresh interpreter with the Hugging Face hub offline.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import tarfile
import time
import venv
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly
from spacy.tokens import Doc
from thinc.api import fix_random_seed

from .conftest import REPO, make_examples

NAME = "piqn_pkgtest"
VERSION = "0.0.1"
PACKAGE = f"en_{NAME}"
TINY = {
    "model": {"head": {"hidden_width": 32, "n_queries": 8, "n_layers": 1, "n_heads": 2, "pointer_width": 16}},
    "n_slots": 4,
}
TRAIN = [
    (
        "The IL-2 gene promoter binds NF-kappa B in human T cells .",
        [(1, 2, "protein"), (1, 3, "DNA"), (5, 7, "protein")],
    ),
    ("Jurkat cells express IL-4 .", [(0, 2, "cell_line"), (3, 4, "protein")]),
    ("IL-4 mRNA was found in T cells .", [(0, 1, "protein"), (0, 2, "RNA"), (5, 7, "cell_type")]),
]
# The training sentences and an unseen one.
TEXTS = [text for text, _ in TRAIN] + ["Human T cells express the IL-2 gene ."]

# Runs in the installed package's environment: loads it by name and prints spans and scores as JSON.
PREDICT = """
import importlib.metadata, json, sys
import spacy
from spacy.tokens import Doc
nlp = spacy.load(sys.argv[1])
module = __import__(sys.argv[1])
out = {"module": module.__file__, "requires": importlib.metadata.requires(sys.argv[1]), "pipe_names": nlp.pipe_names}
out["docs"] = []
for text in json.loads(sys.argv[2]):
    doc = nlp(Doc(nlp.vocab, words=text.split()))
    group = doc.spans["sc"]
    spans = [[s.start, s.end, s.label_] for s in group]
    out["docs"].append({"spans": spans, "scores": [float(x) for x in group.attrs["scores"]]})
print(json.dumps(out))
"""


def train_tiny_pipeline(max_steps: int = 300) -> spacy.language.Language:
    """A tiny piqn pipeline, updated until it predicts most gold spans of its training data (or 300 steps ran).

    The comparison below needs predicted spans: a pipeline at F >= 0.8 on its training sentences predicts several on
    TEXTS, and the ``packaged`` fixture fails if it predicts none.
    """
    fix_random_seed(0)
    nlp = spacy.blank("en")
    # The transformer configs' senter: the package must find its factory too.
    nlp.add_pipe("piqn_senter", name="senter", config={"lr_scale": 20.0})
    nlp.add_pipe("piqn", config=TINY)
    examples = make_examples(nlp, TRAIN)
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.005
    for step in range(1, max_steps + 1):
        nlp.update(examples, sgd=optimizer)
        if step % 25 == 0 and (nlp.evaluate(examples)["spans_sc_f"] or 0.0) >= 0.8:
            break
    return nlp


def predict(nlp: spacy.language.Language) -> list[dict]:
    docs = [nlp(Doc(nlp.vocab, words=text.split())) for text in TEXTS]
    return [
        {
            "spans": [[span.start, span.end, span.label_] for span in doc.spans["sc"]],
            "scores": [float(score) for score in doc.spans["sc"].attrs["scores"]],
        }
        for doc in docs
    ]


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, check=False, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    return result


def trained_pipeline_and_predictions(path: Path) -> list[dict]:
    """Train the tiny pipeline (on one torch thread, as every test: conftest.py) and save it to ``path``.
    RETURNS its predictions on TEXTS."""
    nlp = train_tiny_pipeline()
    expected = predict(nlp)
    assert any(doc["spans"] for doc in expected), "the tiny pipeline should predict something to compare"
    nlp.meta.update({"name": NAME, "version": VERSION})
    path.parent.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(path)
    return expected


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    """(in-process predictions, package dir, sdist): the project's `package` step offline (its sdist built without
    isolation, from the test extra's setuptools) for a trained tiny pipeline, as if trained on GENIA."""
    pytest.importorskip("build", reason="the test extra installs build")
    tmp = tmp_path_factory.mktemp("package")
    expected = trained_pipeline_and_predictions(tmp / "pipeline")
    (tmp / "packages").mkdir()
    run(
        [sys.executable, "-m", "spacy", "package", str(tmp / "pipeline"), str(tmp / "packages")]
        + ["--name", NAME, "--version", VERSION, "--build", "none", "--force"]
    )
    package_dir = tmp / "packages" / f"{PACKAGE}-{VERSION}"
    run([sys.executable, str(REPO / "scripts" / "complete_package.py"), str(package_dir), "--dataset", "genia"])
    result = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", str(package_dir)])
    assert "no files found matching" not in result.stdout + result.stderr
    sdist = package_dir / "dist" / f"{PACKAGE}-{VERSION}.tar.gz"
    assert sdist.is_file()
    return expected, package_dir, sdist


def test_package_requires_spacy_piqn(packaged):
    """spaCy adds the distribution of every registered function the pipeline uses, so spacy-piqn is required."""
    _, package_dir, sdist = packaged
    meta = srsly.read_json(package_dir / "meta.json")
    assert "spacy-piqn>=0.2.0,<0.3.0" in meta["requirements"]
    assert any(requirement.startswith("spacy>=") for requirement in meta["requirements"])
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        requires_txt = next(name for name in names if name.endswith(".egg-info/requires.txt"))
        requires = archive.extractfile(requires_txt).read().decode().split()
    assert any(requirement.startswith("spacy-piqn") for requirement in requires), requires
    assert any(name.endswith("/piqn/model") for name in names)


def test_package_carries_the_data_license(packaged):
    """The weights carry the terms of their training data: LICENSE, meta.json and the README say which."""
    _, package_dir, sdist = packaged
    meta = srsly.read_json(package_dir / "meta.json")
    assert meta["license"] == "CC BY 3.0 (GENIA annotations)"
    assert meta["author"] and meta["url"].startswith("https://") and "GENIA" in meta["description"]
    assert meta["sources"][0]["name"] == "GENIA term corpus 3.02"
    prefix = f"{PACKAGE}-{VERSION}"
    with tarfile.open(sdist) as archive:
        license_text = archive.extractfile(f"{prefix}/LICENSE").read().decode()
        inner = archive.extractfile(f"{prefix}/{PACKAGE}/{prefix}/meta.json").read().decode()
        readme = archive.extractfile(f"{prefix}/README.md").read().decode()
        assert f"{prefix}/LICENSES_SOURCES" in archive.getnames()
    assert "Creative Commons Attribution 3.0" in license_text and "Corpus annotations (c) GENIA Project" in license_text
    assert json.loads(inner)["license"] == meta["license"]
    assert "CC BY 3.0 (GENIA annotations)" in readme


def running_site_dirs() -> list[str]:
    """The site-packages folders of the interpreter running the tests (a virtualenv's own, plus the base ones when
    it was made with system site-packages, plus the user site when that is on)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def environment_over_this_one(env_dir: Path) -> Path:
    """A new virtual environment that sees this environment's packages after its own. RETURNS its python.

    ``venv``'s system_site_packages would point at the *base* interpreter's site-packages, not at the virtualenv the
    tests run in: outside an everything-in-the-base-interpreter setup that has neither spaCy nor a setuptools that
    can build a wheel. Instead a ``.pth`` file in the new environment calls ``site.addsitedir`` on this environment's
    site-packages, which also runs their ``.pth`` files (an editable spacy-piqn is one). Its own site-packages stay
    first on sys.path, so what pip installs there wins. pip and setuptools come from this environment too (the
    ``test`` extra requires a setuptools with ``bdist_wheel``); pip is bootstrapped offline only where it is missing.
    """
    venv.EnvBuilder(with_pip=importlib.util.find_spec("pip") is None).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    calls = "; ".join(f"site.addsitedir({d!r})" for d in running_site_dirs())
    (Path(purelib) / "_running_environment.pth").write_text(f"import site; {calls}\n", encoding="utf-8")
    return python


def test_environment_over_this_one_sees_this_environment(tmp_path):
    python = environment_over_this_one(tmp_path / "venv")
    probe = "import sys, spacy, spacy_piqn, setuptools; print(sys.prefix); print(spacy_piqn.__file__)"
    prefix, module = run([str(python), "-c", probe], cwd=tmp_path).stdout.split()
    assert Path(prefix).resolve() == (tmp_path / "venv").resolve()
    import spacy_piqn

    assert Path(module).resolve() == Path(spacy_piqn.__file__).resolve()


def test_installed_package_loads_and_predicts_the_same(packaged, tmp_path):
    expected, _, sdist = packaged
    env_dir = tmp_path / "venv"
    python = environment_over_this_one(env_dir)
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation", "-q", str(sdist)])

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = run([str(python), "-c", PREDICT, PACKAGE, json.dumps(TEXTS)], env=env, cwd=tmp_path)
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(loaded["module"]).resolve().is_relative_to(env_dir.resolve()), loaded["module"]
    assert any(requirement.startswith("spacy-piqn") for requirement in loaded["requires"]), loaded["requires"]
    assert loaded["pipe_names"] == ["senter", "piqn"]
    for got, want in zip(loaded["docs"], expected, strict=True):
        assert got["spans"] == want["spans"]
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-5, atol=1e-6)

    # The package is not importable outside its environment: the load above used the installed copy.
    outside = subprocess.run(
        [sys.executable, "-c", f"import {PACKAGE}"], check=False, capture_output=True, cwd=tmp_path
    )
    assert outside.returncode != 0


# Runs in the new environment: spacy-piqn works on its own (command line, a blank pipeline with piqn trained a step,
# no spacy-transformers installed) and comes from that environment.
SMOKE = """
import importlib.util, json, subprocess, sys
import spacy, spacy_piqn
from spacy.tokens import Doc, Span
from spacy.training import Example
help_text = subprocess.run([sys.executable, "-m", "spacy_piqn", "--help"], capture_output=True, text=True, check=True)
nlp = spacy.blank("en")
nlp.add_pipe("piqn", config=json.loads(sys.argv[1]))
ref = Doc(nlp.vocab, words="IL-2 binds NF-kappa B".split())
ref.spans["sc"] = [Span(ref, 0, 1, "protein"), Span(ref, 2, 4, "protein")]
examples = [Example(Doc(nlp.vocab, words=[t.text for t in ref]), ref)]
optimizer = nlp.initialize(lambda: examples)
losses = nlp.update(examples, sgd=optimizer)
print(json.dumps({
    "module": spacy_piqn.__file__,
    "version": spacy_piqn.__version__,
    "help": "evaluate" in help_text.stdout and "find-threshold" in help_text.stdout,
    "loss": losses["piqn"],
    "spacy_transformers": importlib.util.find_spec("spacy_transformers") is not None,
    "typed": (__import__("pathlib").Path(spacy_piqn.__file__).parent / "py.typed").is_file(),
}))
"""


def new_environment(env_dir: Path) -> Path:
    """A brand-new virtual environment (its own pip, nothing else). RETURNS its python."""
    venv.EnvBuilder(with_pip=True).create(env_dir)
    return env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def smoke(python: Path, env_dir: Path, env: dict) -> dict:
    result = run([str(python), "-c", SMOKE, json.dumps(TINY)], env=env, cwd=env_dir)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(out["module"]).resolve().is_relative_to(env_dir.resolve()), out["module"]
    import spacy_piqn

    assert out["version"] == spacy_piqn.__version__ and out["help"] and out["typed"], out
    assert out["loss"] > 0 and not out["spacy_transformers"], out
    return out


@pytest.mark.slow
def test_packaged_pipeline_installs_in_a_new_virtualenv(tmp_path):
    """The project's `package` output installs with the one command of docs/install.md into a new virtualenv
    (spacy-piqn from its dist/ folder, the rest from the index), and predicts the same; spacy-piqn's own sdist
    installs and works there too. Needs the package index (spaCy, scipy, ... and the builds' setuptools)."""
    pytest.importorskip("build", reason="the test extra installs build")
    started = time.monotonic()
    root = tmp_path / "project"
    root.mkdir()
    for name in (
        "project.yml",
        "configs",
        "scripts",
        "setup.cfg",
        "setup.py",
        "pyproject.toml",
        "LICENSE",
        "README.md",
        "spacy_piqn",
    ):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, root / name)
    expected = trained_pipeline_and_predictions(root / "training" / "genia" / "piqn_tok2vec" / "model-best")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    variables = ["--vars.dataset", "genia", "--vars.package_name", NAME, "--vars.package_version", VERSION]
    run([sys.executable, "-m", "spacy", "project", "run", "package", ".", *variables], env=env, cwd=root)
    dist = root / "packages" / f"{PACKAGE}-{VERSION}" / "dist"
    import spacy_piqn

    assert sorted(p.name for p in dist.iterdir()) == sorted(
        [f"{PACKAGE}-{VERSION}.tar.gz", f"spacy_piqn-{spacy_piqn.__version__}-py3-none-any.whl"]
    )
    packaged_at = time.monotonic()

    # docs/install.md's command, in an environment that has nothing but pip, outside the project.
    env_dir = tmp_path / "venv"
    python = new_environment(env_dir)
    env.pop("PYTHONPATH", None)
    run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0", "--find-links", str(dist), PACKAGE], env=env)
    installed_at = time.monotonic()
    loaded = json.loads(
        run([str(python), "-c", PREDICT, PACKAGE, json.dumps(TEXTS)], env=env, cwd=env_dir).stdout.splitlines()[-1]
    )
    assert Path(loaded["module"]).resolve().is_relative_to(env_dir.resolve()), loaded["module"]
    for got, want in zip(loaded["docs"], expected, strict=True):
        assert got["spans"] == want["spans"]
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-5, atol=1e-6)
    license_file = (
        Path(
            run(
                [str(python), "-c", f"import {PACKAGE}, pathlib; print(pathlib.Path({PACKAGE}.__file__).parent)"],
                env=env,
            ).stdout.strip()
        )
        / f"{PACKAGE}-{VERSION}"
        / "LICENSE"
    )
    assert "CC BY 3.0" in license_file.read_text(encoding="utf-8")
    smoke(python, env_dir, env)

    # spacy-piqn's sdist, built from the same sources, replaces the wheel there and works the same.
    sdist_dir = tmp_path / "sdist"
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(sdist_dir), str(root)])
    (sdist,) = sdist_dir.glob("spacy_piqn-*.tar.gz")
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(sdist)], env=env)
    smoke(python, env_dir, env)
    print(
        f"package step {packaged_at - started:.0f} s, new environment and install {installed_at - packaged_at:.0f} s, "
        f"checks {time.monotonic() - installed_at:.0f} s"
    )
