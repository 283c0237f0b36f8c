"""Inference speed of a trained PIQN pipeline with and without length groups.

    python bench/group_speed.py MODEL_DIR DEV.spacy [--n-docs 512] [--batch-size 256] [--budgets 0,1024]
    python bench/group_speed.py configs/piqn_trf.cfg DEV.spacy --batch-size 64   # a fresh, untrained pipeline

Loads the pipeline once per budget with the budget as a config override (``max_padded_words`` of
the head and, for the query-carrying encoder, ``max_padded_subwords``), times ``nlp.pipe`` over
fresh gold-token docs (one warm-up batch, best of 2 passes) and checks that the spans and scores
equal those of the first budget. Prints a markdown table.
"""

import argparse
import tempfile
import time
from typing import Any, Dict, List

import numpy as np
import spacy
import torch
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import Config, fix_random_seed


def overrides(nlp_config: Any, budget: int) -> Dict[str, Any]:
    model: Dict[str, Any] = {"max_padded_words": budget}
    if "encoder" in nlp_config["components"]["piqn"]["model"]:
        model["encoder"] = {"max_padded_subwords": budget}
    return {"components": {"piqn": {"model": model}}}


def fresh_pipeline(config_path: str, docs_path: str, out_dir: str) -> str:
    """Initialize the config's pipeline on 50 of the docs (no training) and save it: speed does
    not depend on the weights."""
    fix_random_seed(0)
    config = Config().from_disk(config_path, overrides={"paths.train": docs_path, "paths.dev": docs_path})
    nlp = load_model_from_config(config, auto_fill=True)
    refs = list(DocBin().from_disk(docs_path).get_docs(nlp.vocab))[:50]
    nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in refs])
    nlp.to_disk(out_dir)
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("docs")
    parser.add_argument("--n-docs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--budgets", default="0,1024")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.model.endswith(".cfg"):
        args.model = fresh_pipeline(args.model, args.docs, tempfile.mkdtemp())
    config = spacy.load(args.model).config
    reference: List[Any] = []
    print(f"| max padded words | sents/s | same spans and scores as {args.budgets.split(',')[0]} |")
    print("|---:|---:|---|")
    for budget in (int(b) for b in args.budgets.split(",")):
        nlp = spacy.load(args.model, config=overrides(config, budget))
        words = [[t.text for t in d] for d in DocBin().from_disk(args.docs).get_docs(nlp.vocab)][: args.n_docs]
        list(nlp.pipe([Doc(nlp.vocab, words=w) for w in words[: args.batch_size]], batch_size=args.batch_size))
        best, out = float("inf"), []
        for _ in range(2):
            docs = [Doc(nlp.vocab, words=w) for w in words]
            start = time.perf_counter()
            out = list(nlp.pipe(docs, batch_size=args.batch_size))
            best = min(best, time.perf_counter() - start)
        key = nlp.get_pipe("piqn").key
        found = [([(s.start, s.end, s.label_) for s in d.spans[key]], d.spans[key].attrs["scores"]) for d in out]
        if not reference:
            reference = found
        same = all(a[0] == b[0] and np.allclose(a[1], b[1], atol=1e-5) for a, b in zip(found, reference))
        print(f"| {budget} | {len(words) / best:.1f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
