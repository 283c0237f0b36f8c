"""Training update time and inference speed of piqn and spancat as the number of entity types grows.

    python bench/many_labels.py GENIA_TRAIN.jsonl [--labels 5,100,1000] [--docs 400] [--threads 1]

PIQN types each query with one classifier over all labels (no per-type queries or per-type scores of
every candidate span), so its cost should barely depend on the label count; spancat scores every
candidate n-gram against every label. The GENIA text keeps its gold spans; each span gets a label drawn
at random from N synthetic ones (seeded), so only the label count changes. Both pipelines use the
shipped tok2vec configs (`configs/piqn_tok2vec.cfg`, `bench/configs/spancat_tok2vec.cfg`), fresh weights.
Prints one table row per (system, N): seconds per update of 40 docs (median of 8, after 2 warm-ups), the
model's sentences/s (encoder + the component's ``predict``, no spans written; batch 256, best of 2) and
``nlp.pipe``'s. The models are untrained: an untrained spancat keeps about half of all n-gram x label pairs, so
its ``nlp.pipe`` column mostly times writing spans; the model column is the comparison.
"""

import argparse
import random
import statistics
import time
from pathlib import Path

import srsly
import torch
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import Config, fix_random_seed

REPO = Path(__file__).resolve().parent.parent
CONFIGS = {"piqn": REPO / "configs" / "piqn_tok2vec.cfg", "spancat": REPO / "bench" / "configs" / "spancat_tok2vec.cfg"}


def examples_with_labels(nlp, records, n_labels: int, seed: int = 0):
    rng = random.Random(seed)
    labels = [f"T{i:04d}" for i in range(n_labels)]
    key = "sc"
    out = []
    for record in records:
        doc = Doc(nlp.vocab, words=record["tokens"])
        doc.spans[key] = [Span(doc, e["start"], e["end"], rng.choice(labels)) for e in record["entities"]]
        out.append(Example(Doc(nlp.vocab, words=record["tokens"]), doc))
    return out, labels


def measure(system: str, records, n_labels: int):
    fix_random_seed(0)
    cfg = Config().from_disk(CONFIGS[system], overrides={"paths.train": "unused.spacy", "paths.dev": "unused.spacy"})
    nlp = load_model_from_config(cfg, auto_fill=True)
    examples, labels = examples_with_labels(nlp, records, n_labels)
    pipe = nlp.get_pipe(system)
    for label in labels:  # every label exists, even those no sampled span drew
        pipe.add_label(label)
    optimizer = nlp.initialize(lambda: examples)
    batches = [examples[i : i + 40] for i in range(0, len(examples), 40)]
    times = []
    for i, batch in enumerate(batches[:10]):
        start = time.perf_counter()
        nlp.update(batch, sgd=optimizer)
        if i >= 2:
            times.append(time.perf_counter() - start)
    best = forward = 0.0
    for _ in range(2):
        docs = [Doc(nlp.vocab, words=r["tokens"]) for r in records]
        start = time.perf_counter()
        list(nlp.pipe(docs, batch_size=256))
        best = max(best, len(docs) / (time.perf_counter() - start))
        # The model alone: the encoder and the component's predict, no spans written (an untrained spancat
        # keeps about half of all n-gram x label pairs at threshold 0.5, which is what nlp.pipe then times).
        docs = [Doc(nlp.vocab, words=r["tokens"]) for r in records]
        start = time.perf_counter()
        for i in range(0, len(docs), 256):
            batch = docs[i : i + 256]
            for name, proc in nlp.pipeline:
                if name == system:
                    proc.predict(batch)
                else:
                    batch = list(proc.pipe(batch))
        forward = max(forward, len(docs) / (time.perf_counter() - start))
    return statistics.median(times), forward, best, len(pipe.labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path, help="GENIA train.jsonl")
    parser.add_argument("--labels", default="5,100,1000")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    records = [r for r in srsly.read_jsonl(args.train) if r["tokens"]][: args.docs]
    print(f"{len(records)} GENIA sentences, {sum(len(r['entities']) for r in records)} spans, {args.threads} thread(s)")
    print("| system | labels | s/update (40 docs) | model sents/s | nlp.pipe sents/s (untrained) |")
    print("|---|---:|---:|---:|---:|")
    for n_labels in [int(x) for x in args.labels.split(",")]:
        for system in ("piqn", "spancat"):
            per_update, forward, sents, n = measure(system, records, n_labels)
            print(f"| {system} | {n:,} | {per_update:.3f} | {forward:.0f} | {sents:.0f} |", flush=True)


if __name__ == "__main__":
    main()
