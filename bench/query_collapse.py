"""Do a trained PIQN pipeline's queries point at different spans, or have they collapsed?

    python bench/query_collapse.py MODEL_DIR DEV.spacy [--n-docs 400]  (0: all docs)

For each window: the distinct spans the M queries point at (argmax left, argmax right, whatever
their class), and whether each gold span is among them. Prints the mean number of distinct spans
per window and the share of gold spans some query points at, by the number of gold spans in the
window. A healthy model points at most gold spans; a collapsed one at one span per window.
"""

import argparse
from collections import Counter

import spacy
import torch
from spacy.tokens import Doc, DocBin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("docs")
    parser.add_argument("--n-docs", type=int, default=400, help="docs to read (0: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    nlp = spacy.load(args.model)
    piqn = nlp.get_pipe("piqn")
    refs = list(DocBin().from_disk(args.docs).get_docs(nlp.vocab))[: args.n_docs or None]
    docs = [Doc(nlp.vocab, words=[t.text for t in d]) for d in refs]
    for name, proc in nlp.pipeline:
        if name != "piqn":
            docs = list(proc.pipe(docs))
    out = piqn.predict(docs)
    ops = piqn.model.ops
    lefts = ops.to_numpy(out.left[-1]).argmax(-1)
    rights = ops.to_numpy(out.right[-1]).argmax(-1)
    found, total, distinct = Counter(), Counter(), []
    for b, window in enumerate(out.windows):
        pointed = {(window.start + int(i), window.start + int(j) + 1) for i, j in zip(lefts[b], rights[b])}
        distinct.append(len(pointed))
        gold = {(s.start, s.end) for s in refs[window.doc].spans[piqn.key] if window.start <= s.start < window.end}
        for span in gold:
            total[len(gold)] += 1
            found[len(gold)] += span in pointed
    print(f"{len(out.windows)} windows, {out.left.shape[2]} queries each")
    print(f"distinct spans pointed at per window: mean {sum(distinct) / max(len(distinct), 1):.2f}")
    print("| gold spans in window | gold spans pointed at by some query |")
    print("|---:|---:|")
    for k in sorted(total):
        print(f"| {k} | {found[k]} / {total[k]} |")
    print(f"| all | {sum(found.values())} / {sum(total.values())} |")


if __name__ == "__main__":
    main()
