"""Sentences/s of a trained pipeline over a JSONL corpus: plain ``nlp.pipe`` vs Ray Data with 1 and 2 workers.

    python bench/ray_throughput.py MODEL CORPUS.jsonl [--docs 8000] [--workers 1,2] [--batch-size 64]

Each Ray run starts a fresh local Ray instance (start-up is timed apart) and writes its JSONL shards to a
temporary folder; each worker uses one torch thread, as does the plain ``nlp.pipe`` baseline. Needs the
``[ray]`` extra. Prints a markdown table; checks that every run returned the same spans as ``nlp.pipe``.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import ray
import spacy
import torch
from spacy.tokens import Doc

from spacy_piqn.scale import predict_jsonl_with_ray, read_predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--docs", type=int, default=8000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    with open(args.corpus, encoding="utf8") as file:
        records = [json.loads(line) for line in file if line.strip()][: args.docs]
    records = [{"id": str(i), "tokens": r["tokens"]} for i, r in enumerate(records) if r["tokens"]]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "in.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
        torch.set_num_threads(1)
        nlp = spacy.load(args.model)
        start = time.perf_counter()
        docs = list(nlp.pipe((Doc(nlp.vocab, words=r["tokens"]) for r in records), batch_size=args.batch_size))
        base = time.perf_counter() - start
        expected = [[(s.start, s.end, s.label_) for s in doc.spans["sc"]] for doc in docs]
        print(f"{len(records)} docs, {sum(len(r['tokens']) for r in records)} words, batch {args.batch_size}")
        print("| run | workers | start-up s | predict + write s | sents/s | same spans |")
        print("|---|---:|---:|---:|---:|---|")
        print(f"| `nlp.pipe`, 1 torch thread | - | - | {base:.1f} | {len(records) / base:.0f} | yes |", flush=True)
        for workers in [int(w) for w in args.workers.split(",")]:
            start = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            ray.data.DataContext.get_current().enable_progress_bars = False
            startup = time.perf_counter() - start
            out = Path(tmp) / f"out{workers}"
            start = time.perf_counter()
            predict_jsonl_with_ray(args.model, corpus, out, workers=workers, batch_size=args.batch_size)
            took = time.perf_counter() - start
            ray.shutdown()
            same = [[tuple(s[:3]) for s in row["spans"]] for row in read_predictions(out)] == expected
            print(
                f"| Ray Data | {workers} | {startup:.1f} | {took:.1f} | {len(records) / took:.0f} | {same} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
