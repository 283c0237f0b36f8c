"""bench/results.jsonl is well-formed and bench/RESULTS.md shows what bench/results_table.py makes of it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))

import results_table  # noqa: E402


def rows(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines() if line.strip()]


@pytest.mark.parametrize(
    "row", rows(BENCH / "results.jsonl"), ids=lambda r: f"{r['dataset']}-{r['system']}-{r['seed']}"
)
def test_results_rows_have_the_required_keys_and_types(row):
    assert results_table.check_row(row) == []
    assert row["dataset"] in results_table.DATASETS
    assert row["encoder"] in results_table.ENCODERS
    for key in ("p", "r", "loc_f", "cls_f"):
        assert row.get(key) is None or 0 <= row[key] <= 100


def test_check_row_reports_fractions_and_missing_keys():
    row = {"system": "piqn", "encoder": "tok2vec", "dataset": "genia", "seed": 0, "budget": "20min", "f": 0.76}
    problems = results_table.check_row(row)
    assert "no 'commit'" in problems and "no 'source'" in problems
    assert any("fraction" in p for p in problems)


def test_speed_facts_say_where_they_come_from():
    for fact in rows(BENCH / "speed.jsonl"):
        for key in ("measure", "system", "values", "unit", "commit", "machine", "date", "command", "source"):
            assert fact.get(key) not in (None, ""), (key, fact)
        assert all(isinstance(v, (int, float)) for v in fact["values"])


def test_mean_rounds_half_up_like_the_text():
    assert str(results_table.mean([76.43, 76.06, 76.18, 76.19])) == "76.22"
    assert str(results_table.mean([87.66, 87.75])) == "87.71"


def test_results_md_is_up_to_date():
    done = subprocess.run(
        [sys.executable, str(BENCH / "results_table.py"), "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
