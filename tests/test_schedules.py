"""The learning-rate schedule of the tok2vec config: warm-up, then a linear decay to a floor."""

from itertools import islice
from pathlib import Path

import pytest
from spacy.util import load_config, registry

import spacy_piqn  # noqa: F401  (registers the schedule)

REPO = Path(__file__).resolve().parents[1]


def _rates(n: int, **settings) -> list:
    schedule = registry.resolve({"s": {"@schedules": "spacy-piqn.warmup_linear.v1", **settings}})["s"]
    return list(islice(schedule, n))


def test_warms_up_then_decays_to_the_final_rate_and_stays_there():
    rates = _rates(400, initial_rate=1.0, warmup_steps=100, total_steps=300, final_rate=0.5)
    assert rates[0] == 0.0 and rates[50] == pytest.approx(0.5) and rates[100] == pytest.approx(1.0)
    assert rates[200] == pytest.approx(0.75) and rates[300] == pytest.approx(0.5)
    assert rates[399] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(rates[100:], rates[101:]))


def test_final_rate_zero_is_thincs_warmup_linear():
    ours = _rates(700, initial_rate=1e-3, warmup_steps=100, total_steps=600)
    thincs = list(islice(registry.schedules.get("warmup_linear.v1")(1e-3, 100, 600), 700))
    assert ours == pytest.approx(thincs)


def test_a_run_shorter_than_the_warm_up_still_gets_rates():
    rates = _rates(20, initial_rate=1.0, warmup_steps=10, total_steps=5, final_rate=0.5)
    assert rates[5] == pytest.approx(0.5) and rates[10:] == pytest.approx([0.5] * 10)
    assert _rates(3, initial_rate=1.0, warmup_steps=0, total_steps=2) == pytest.approx([1.0, 0.5, 0.0])


@pytest.mark.parametrize(
    "settings",
    [
        {"warmup_steps": 10, "total_steps": -1, "final_rate": 0.0},
        {"warmup_steps": -1, "total_steps": 100, "final_rate": 0.0},
        {"warmup_steps": 10, "total_steps": 100, "final_rate": -0.1},
        {"warmup_steps": 10, "total_steps": 100, "final_rate": 2.0},
    ],
)
def test_bad_settings_are_named(settings):
    with pytest.raises(ValueError, match=r"^\[E047\]"):
        _rates(1, initial_rate=1.0, **settings)


def test_tok2vec_config_ends_its_run_at_half_the_peak_rate():
    """The optimizer the config builds steps through the schedule: its learning rate at each update of a run whose
    length is given as the project gives it (max_steps and the schedule's total_steps)."""
    path = REPO / "configs" / "piqn_tok2vec.cfg"
    overrides = {"training.max_steps": 1000, "training.optimizer.learn_rate.total_steps": 1000}
    config = load_config(path, overrides=overrides, interpolate=True)
    optimizer = registry.resolve({"o": config["training"]["optimizer"]})["o"]
    rates = [optimizer.learn_rate]
    for _ in range(1000):
        optimizer.step_schedules()
        rates.append(optimizer.learn_rate)
    assert rates[0] == 0.0 and max(rates) == pytest.approx(1e-3) and rates[1000] == pytest.approx(5e-4)
