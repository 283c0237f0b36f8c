"""Predict over a large corpus with Ray Data: the pipeline loads once per worker, docs go in batches.

Ray is optional (``pip install -e ".[ray]"``) and imported only here. The input is JSONL with a
``tokens`` list per line (the project's data format; other fields such as ``entities`` are ignored) or a
``text`` string; the output is JSONL shards (one line per input line, in input order) with the input's
``id`` (or its line number) and the predicted ``spans`` as [start, end, label, score], end exclusive.
Works on a local machine (Ray starts a local cluster) or on a cluster (``address="auto"`` on a node
where ``ray start`` ran); see docs/cli.md, `predict-ray`.
"""

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from .errors import Errors


class SpanPredictor:
    """A Ray Data ``map_batches`` callable class: one loaded pipeline per actor (worker process)."""

    def __init__(self, model: str, spans_key: str = "sc", batch_size: int = 64, threads: int = 1) -> None:
        import spacy
        import torch

        torch.set_num_threads(threads)
        self.nlp = spacy.load(model)
        self.spans_key = spans_key
        self.batch_size = batch_size

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from spacy.tokens import Doc

        if "tokens" in batch:
            docs = [Doc(self.nlp.vocab, words=[str(t) for t in tokens]) for tokens in batch["tokens"]]
        else:
            docs = [self.nlp.make_doc(str(text)) for text in batch["text"]]
        spans = []
        for doc in self.nlp.pipe(docs, batch_size=self.batch_size):
            group = doc.spans.get(self.spans_key, [])
            scores = group.attrs.get("scores", [None] * len(group)) if len(group) else []
            spans.append(
                json.dumps(
                    [
                        [s.start, s.end, s.label_, None if p is None else round(float(p), 6)]
                        for s, p in zip(group, scores)
                    ]
                )
            )
        return {"id": batch["id"], "spans": np.asarray(spans, dtype=object)}


def predict_jsonl_with_ray(
    model: Union[str, Path],
    input_path: Union[str, Path],
    output_dir: Union[str, Path],
    *,
    workers: int = 2,
    batch_size: int = 64,
    threads_per_worker: int = 1,
    spans_key: str = "sc",
    address: Optional[str] = None,
    shard_size: int = 10_000,
    predictor: type = SpanPredictor,
) -> int:
    """Predict every line of ``input_path`` with ``workers`` pipeline actors and write JSONL shards
    (``part-00000.jsonl``, ... of ``shard_size`` lines) to ``output_dir``, in input order. A worker that
    dies is restarted and its batch retried (Ray Data's default for actor pools; the tests kill one). ``predictor``: the
    callable class each actor runs (a subclass of ``SpanPredictor`` can write other fields).
    Returns the number of documents written."""
    import ray

    if workers < 1:
        raise ValueError(Errors.E039.format(workers=workers))
    records: List[Dict[str, Any]] = []
    with open(input_path, encoding="utf8") as file:
        for i, line in enumerate(file):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(Errors.E040.format(path=input_path, line=i + 1, reason=error.msg)) from None
            if not isinstance(record.get("tokens"), list) and not isinstance(record.get("text"), str):
                raise ValueError(Errors.E041.format(path=input_path, line=i + 1))
            row = {"id": str(record.get("id", i))}
            if isinstance(record.get("tokens"), list):
                row["tokens"] = [str(t) for t in record["tokens"]]
            else:
                row["text"] = record["text"]
            records.append(row)
    if not records:
        raise ValueError(Errors.E042.format(path=input_path))
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    dataset = ray.data.from_items(records, override_num_blocks=max(workers * 4, 1))
    predicted = dataset.map_batches(
        predictor,
        fn_constructor_kwargs={
            "model": str(Path(model).resolve()) if Path(model).exists() else str(model),
            "spans_key": spans_key,
            "batch_size": batch_size,
            "threads": threads_per_worker,
        },
        batch_size=batch_size,
        batch_format="numpy",
        concurrency=workers,
        num_cpus=threads_per_worker,
    )
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    shard = None
    try:
        for batch in predicted.iter_batches(batch_format="numpy", batch_size=None):
            for doc_id, spans in zip(batch["id"], batch["spans"]):
                if written % shard_size == 0:
                    if shard is not None:
                        shard.close()
                    shard = open(out / f"part-{written // shard_size:05d}.jsonl", "w", encoding="utf8")
                shard.write(json.dumps({"id": str(doc_id), "spans": json.loads(spans)}) + "\n")
                written += 1
    finally:
        if shard is not None:
            shard.close()
    return written


def read_predictions(output_dir: Union[str, Path]) -> List[Dict[str, Any]]:
    """The rows ``predict_jsonl_with_ray`` wrote, in input order."""
    rows = []
    for shard in sorted(Path(output_dir).glob("part-*.jsonl")):
        with open(shard, encoding="utf8") as file:
            rows.extend(json.loads(line) for line in file if line.strip())
    return rows
