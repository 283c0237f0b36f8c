"""The head's BiLSTM on the CPU: packed sequences (what nn.LSTM needs to keep padding out) against
``unpacked_bilstm`` (each direction fused, the backward one on windows reversed within their lengths).

    python bench/bilstm_speed.py [CORPUS.spacy] [--width 192] [--windows 40] [--threads 1]

Window lengths are the sentence lengths of CORPUS (random 5-60 without one), in batches of
``--windows``; prints milliseconds per batch for training (forward + backward) and inference.
"""

import argparse
import random
import time
from typing import Callable, List

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from spacy_piqn.torch_modules.common import unpacked_bilstm


def packed(lstm: nn.LSTM, padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    seq = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(lstm(seq)[0], batch_first=True, total_length=padded.shape[1])[0]


def time_ms(run: Callable[[], None], repeats: int) -> float:
    run()
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?")
    parser.add_argument("--width", type=int, default=192, help="the head's hidden_width (BiLSTM output)")
    parser.add_argument("--n-in", type=int, default=96, help="token vector width (the tok2vec's)")
    parser.add_argument("--windows", type=int, default=40, help="windows per batch")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = random.Random(0)
    if args.corpus:
        import spacy
        from spacy.tokens import DocBin

        pool = [len(doc) for doc in DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab)]
    else:
        pool = [rng.randint(5, 60) for _ in range(1000)]
    lengths = torch.tensor(rng.sample(pool, args.windows))
    windows: List[torch.Tensor] = [torch.randn(int(n), args.n_in) for n in lengths]
    lstm = nn.LSTM(args.n_in, args.width // 2, bidirectional=True, batch_first=True)
    padded = pad_sequence(windows, batch_first=True).requires_grad_()

    def train(fn):
        return lambda: fn(lstm, padded, lengths).sum().backward()

    def infer(fn):
        def run():
            with torch.no_grad():
                fn(lstm, padded, lengths)

        return run

    print(f"{args.windows} windows of {int(lengths.min())}-{int(lengths.max())} words, width {args.width}, "
          f"{args.threads} thread(s)")  # fmt: skip
    print("| BiLSTM | train ms / batch | inference ms / batch |")
    print("|---|---:|---:|")
    for name, fn in (("packed", packed), ("unpacked_bilstm", unpacked_bilstm)):
        print(f"| {name} | {time_ms(train(fn), args.repeats):.1f} | {time_ms(infer(fn), args.repeats):.1f} |")


if __name__ == "__main__":
    main()
