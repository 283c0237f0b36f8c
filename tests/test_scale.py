"""Ray Data inference (`spacy_piqn.scale`): same spans as nlp.pipe, in order, a dead worker retried.

Needs the optional `[ray]` extra: skipped without it, unless SPACY_PIQN_REQUIRE_RAY=1 (CI installs the extra in a step
of its own and sets it, so a broken Ray install fails instead of skipping)."""

import json
import os

import pytest
from spacy.tokens import Doc

if os.environ.get("SPACY_PIQN_REQUIRE_RAY") == "1":
    import ray
else:
    ray = pytest.importorskip("ray")

from spacy_piqn.scale import SpanPredictor, predict_jsonl_with_ray, read_predictions  # noqa: E402

from .conftest import NESTED_DATA  # noqa: E402


def test_ray_predictions_equal_nlp_pipe_in_order_and_survive_a_dead_worker(trained_tiny, tmp_path):
    nlp, _ = trained_tiny
    nlp.to_disk(tmp_path / "model")
    # 320 docs: the training sentences with their words rotated, so predictions differ between docs.
    records = []
    for i in range(320):
        words = NESTED_DATA[i % len(NESTED_DATA)][0].split()
        k = i % len(words)
        records.append({"id": f"doc{i}", "tokens": words[k:] + words[:k]})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    expected = []
    for doc in nlp.pipe(Doc(nlp.vocab, words=r["tokens"]) for r in records):
        group = doc.spans["sc"]
        expected.append([[s.start, s.end, s.label_, round(float(p), 6)] for s, p in zip(group, group.attrs["scores"])])
    assert sum(map(len, expected)) > 0

    marker = str(tmp_path / "crash-once")
    open(marker, "w").close()

    class CrashOnce(SpanPredictor):
        """The first batch any worker sees kills that worker's process."""

        def __call__(self, batch):
            try:  # removing is atomic: when two workers race, exactly one of them claims the crash
                os.remove(marker)
            except FileNotFoundError:
                pass
            else:
                os._exit(1)
            return super().__call__(batch)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        n = predict_jsonl_with_ray(
            tmp_path / "model",
            tmp_path / "in.jsonl",
            tmp_path / "out",
            workers=2,
            batch_size=16,
            shard_size=100,
            predictor=CrashOnce,
        )
    finally:
        ray.shutdown()
    assert not os.path.exists(marker)  # a worker did die
    rows = read_predictions(tmp_path / "out")
    assert n == len(rows) == 320 and len(list((tmp_path / "out").glob("part-*.jsonl"))) == 4
    assert [row["id"] for row in rows] == [r["id"] for r in records]
    # Same spans; scores equal up to float rounding (other batches pad windows differently).
    assert [[s[:3] for s in row["spans"]] for row in rows] == [[s[:3] for s in doc] for doc in expected]
    got = [s[3] for row in rows for s in row["spans"]]
    assert max(abs(a - b) for a, b in zip(got, (s[3] for doc in expected for s in doc))) < 1e-4
