"""Every snippet README.md shows works as written: Python blocks run, shell blocks run in a copy of the repository,
the JSON example converts. A block that another test already runs says so in a `<!-- snippet: covered by ... -->`
comment right above it, and that test must exist."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

BLOCK = re.compile(r"(?:<!-- snippet: (?P<note>.*?) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)^```", re.S | re.M)


def readme_blocks():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [(m["lang"], m["code"], m["note"]) for m in BLOCK.finditer(text)]


def blocks(lang: str):
    return [(code, note) for block_lang, code, note in readme_blocks() if block_lang == lang]


def test_readme_fits_on_a_few_screens_and_names_what_covers_skipped_blocks():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    for _, _, note in readme_blocks():
        if note is None:
            continue
        for path, name in re.findall(r"(tests/test_\w+\.py)::(\w+)", note):
            assert re.search(rf"^def {name}\(", (REPO / path).read_text(encoding="utf-8"), re.M), (path, name)


def test_python_snippets_run(tmp_path):
    snippets = [code for code, note in blocks("python") if note is None]
    assert snippets
    for i, code in enumerate(snippets):
        script = tmp_path / f"snippet{i}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # The example prints one line per predicted span: start, end, label, text, score.
        rows = [line.split() for line in done.stdout.splitlines()]
        assert rows and all(row[0].isdigit() and row[1].isdigit() for row in rows), done.stdout


def test_json_example_converts(tmp_path):
    (example,) = [code for code, _ in blocks("json")]
    record = json.loads(example)
    path = tmp_path / "example.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "spacy_piqn", "convert", str(path), str(tmp_path / "example.spacy")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"entities written\s+{len(record['entities'])}\b", done.stdout), done.stdout


@pytest.mark.slow
def test_shell_snippets_run_in_a_copy_of_the_repository(tmp_path):
    """Each uncovered shell block, line by line, in a fresh copy of the repository (the train block trains 100
    updates on the bundled sample)."""
    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "corpus", "training", "packages", "metrics", "visuals", "*.egg-info"
    )
    shutil.copytree(REPO, root, ignore=ignore)
    snippets = [code for code, note in blocks("bash") if note is None]
    assert snippets
    for code in snippets:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (root / "training" / "model-best").exists() and (root / "metrics.json").exists()
