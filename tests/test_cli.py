"""`python -m spacy_piqn` output a user reads: the evaluate report, and one coded line for a GPU that cannot be used."""

import re

import pytest
import srsly
from spacy.tokens import DocBin
from thinc.api import prefer_gpu, require_cpu
from typer.testing import CliRunner

from spacy_piqn.cli import app


@pytest.fixture(scope="module")
def model_and_dev(trained_tiny, tmp_path_factory):
    nlp, examples = trained_tiny
    tmp = tmp_path_factory.mktemp("cli")
    nlp.to_disk(tmp / "model")
    DocBin(docs=[eg.reference for eg in examples], store_user_data=True).to_disk(tmp / "dev.spacy")
    return tmp / "model", tmp / "dev.spacy"


def test_evaluate_prints_scores_speed_in_words_per_second_and_a_table_per_type(model_and_dev, tmp_path):
    model, dev = model_and_dev
    result = CliRunner().invoke(app, ["evaluate", str(model), str(dev), "--output", str(tmp_path / "scores.json")])
    assert result.exit_code == 0, result.output
    scores = srsly.read_json(tmp_path / "scores.json")
    lines = result.output.splitlines()
    assert re.fullmatch(r"  speed +\d+ words/s", next(line for line in lines if line.lstrip().startswith("speed")))
    assert f"  spans_sc_loc_f  {scores['spans_sc_loc_f'] * 100:8.2f}" in lines
    errors = scores["spans_sc_errors"]
    assert "spans_sc_errors: " + ", ".join(f"{name} {n:,}" for name, n in errors.items()) in lines
    header = lines.index("spans_sc_per_type (%):")
    assert lines[header + 1].split() == ["type", "P", "R", "F"]
    per_type = scores["spans_sc_per_type"]
    rows = [line.split() for line in lines[header + 2 : header + 2 + len(per_type)]]
    assert [row[0] for row in rows] == sorted(per_type)
    for label, *cells in rows:
        assert [float(cell) for cell in cells] == [round(per_type[label][m] * 100, 2) for m in ("p", "r", "f")]


COMMANDS = {
    "evaluate": lambda model, dev, tmp: ["evaluate", model, dev],
    "visualize": lambda model, dev, tmp: ["visualize", model, dev, str(tmp / "out.html")],
    "find-threshold": lambda model, dev, tmp: ["find-threshold", model, dev],
    "analyze": lambda model, dev, tmp: ["analyze", model, dev, str(tmp / "analysis"), "--no-plots"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_gpu_id_without_a_usable_gpu_is_one_coded_line(model_and_dev, tmp_path, command):
    if prefer_gpu(0):  # a machine with CuPy and CUDA: the GPU works, nothing to report
        require_cpu()
        pytest.skip("spaCy can use GPU 0 here")
    model, dev = model_and_dev
    result = CliRunner().invoke(app, [*COMMANDS[command](str(model), str(dev), tmp_path), "--gpu-id", "0"])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: [E211] --gpu-id 0: spaCy cannot use the GPU (")
    assert "--gpu-id -1" in result.stderr
    assert isinstance(result.exception, SystemExit)  # not a traceback


def test_docs_cli_md_lists_every_command_and_option():
    """docs/cli.md has a section per command that names each of its options."""
    import typer

    from .conftest import REPO

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    group = typer.main.get_command(app)
    assert set(group.commands) <= set(sections), sorted(set(group.commands) - set(sections))
    for name, command in group.commands.items():
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--") and opt != "--help":
                    assert f"`{opt}`" in sections[name], (name, opt)
