"""Seconds per training update and inference sentences/s of a fresh PIQN model, with config overrides.

    python bench/step_speed.py CORPUS.spacy [section.key=JSON ...]
    python bench/step_speed.py corpus/genia_train.spacy components.piqn.model.n_queries=30 components.piqn.n_slots=20

Trains 5 updates of 40 docs (after one warm-up update) and times ``nlp.pipe`` over the 360 docs at batch 64.
"""

import json
import sys
import time

from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import Config, fix_random_seed


def main(corpus: str, overrides: list) -> None:
    fix_random_seed(0)
    cfg = Config().from_disk("configs/piqn_tok2vec.cfg", overrides={"paths.train": corpus, "paths.dev": corpus})
    for item in overrides:
        key, value = item.split("=")
        *path, last = key.split(".")
        node = cfg
        for part in path:
            node = node[part]
        try:
            node[last] = json.loads(value)
        except json.JSONDecodeError:
            node[last] = value
    nlp = load_model_from_config(cfg, auto_fill=True)
    refs = list(DocBin().from_disk(corpus).get_docs(nlp.vocab))[:360]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in refs]
    optimizer = nlp.initialize(lambda: examples)
    batches = [examples[i : i + 40] for i in range(0, 360, 40)]
    nlp.update(batches[0], sgd=optimizer)
    start = time.time()
    for batch in batches[1:6]:
        nlp.update(batch, sgd=optimizer)
    per_step = (time.time() - start) / 5
    docs = [Doc(nlp.vocab, words=[t.text for t in d]) for d in refs]
    start = time.time()
    list(nlp.pipe(docs, batch_size=64))
    print(overrides, f"train s/update (40 docs) {per_step:.2f}  infer sents/s {len(docs) / (time.time() - start):.0f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
