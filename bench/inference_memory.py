"""Does inference memory grow over many docs? Prints RSS every 1,000 docs.

python bench/inference_memory.py MODEL_DIR DATA.spacy [--n-docs 10000] [--batch-size 64]
"""

import argparse
import itertools
import time

import psutil
import spacy
from spacy.tokens import Doc, DocBin


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--n-docs", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    refs = list(DocBin().from_disk(args.data).get_docs(nlp.vocab))
    words = [[t.text for t in d] for d in refs]
    stream = (Doc(nlp.vocab, words=w) for w in itertools.islice(itertools.cycle(words), args.n_docs))
    proc = psutil.Process()
    start = time.time()
    print("docs\tseconds\trss_mb")
    for i, _ in enumerate(nlp.pipe(stream, batch_size=args.batch_size), start=1):
        if i % 1000 == 0:
            print(f"{i}\t{time.time() - start:.1f}\t{proc.memory_info().rss / 2**20:.0f}", flush=True)


if __name__ == "__main__":
    main()
