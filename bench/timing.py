"""Loading, reading and timing shared by bench/run_bench.py's subcommands.

Standard library only at import time (bench/gpu/kit.py imports run_bench.py, and with it this module, before
spaCy is installed); spaCy, torch and psutil are imported where they are used.

- ``load_pipeline``: ``spacy.load`` with torch on a given number of threads, optionally on a GPU;
- ``read_gold_docs`` / ``gold_examples``: gold-token docs with their gold ``doc.spans["sc"]``, from a DocBin
  (``.spacy``) or from JSONL (one ``{"tokens": [...], "entities": [{"start", "end", "label"}]}`` per line);
- ``best_seconds`` / ``timed_pipe`` / ``pipe_rate``: the best of N timed passes; ``nlp.pipe`` over fresh docs of
  the gold words, after one warm-up batch;
- ``peak_rss_mb`` / ``rss_mb``: a process's peak (VmHWM) and current resident set.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

SPANS_KEY = "sc"


def load_pipeline(model: Path | str, threads: int, gpu_id: int = -1):
    """``spacy.load(model)`` with torch on ``threads`` threads (and on GPU ``gpu_id`` if >= 0)."""
    import spacy
    import torch

    torch.set_num_threads(threads)
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    return spacy.load(model)


def read_gold_docs(path: Path | str, vocab, limit: int = 0, skip_empty: bool = False) -> list:
    """The gold docs of ``path`` with their spans in ``doc.spans["sc"]``: a DocBin (``.spacy``, as written by
    ``python -m spacy_piqn convert``) or JSONL with ``tokens`` and ``entities``. ``limit``: at most this many (0:
    all); ``skip_empty``: leave out docs without tokens (before the limit counts)."""
    from spacy.tokens import Doc, DocBin, Span

    path = Path(path)
    if path.suffix == ".spacy":
        docs = DocBin().from_disk(path).get_docs(vocab)
    else:

        def from_jsonl():
            with path.open(encoding="utf8") as file:
                for line in file:
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    doc = Doc(vocab, words=record["tokens"])
                    doc.spans[SPANS_KEY] = [
                        Span(doc, e["start"], e["end"], label=e["label"]) for e in record.get("entities", [])
                    ]
                    yield doc

        docs = from_jsonl()
    out = []
    for doc in docs:
        if skip_empty and len(doc) == 0:
            continue
        out.append(doc)
        if len(out) == limit:
            break
    return out


def gold_examples(nlp, data_path: Path) -> list:
    """Examples whose predicted docs carry the reference's tokens (words and spaces), from a DocBin (through
    ``spacy-piqn.Corpus.v1``'s reader) or JSONL."""
    from spacy.training import Example

    if Path(data_path).suffix == ".spacy" or Path(data_path).is_dir():
        from spacy_piqn.corpus import create_gold_token_corpus

        return list(create_gold_token_corpus(data_path, gold_tokens=True)(nlp))
    refs = read_gold_docs(data_path, nlp.vocab)
    return [Example(doc, ref) for doc, ref in zip(fresh_docs(nlp.vocab, [words_of(r) for r in refs]), refs)]


def words_of(doc) -> list[str]:
    return [token.text for token in doc]


def best_seconds(run: Callable[[Any], Any], repeats: int, prepare: Callable[[], Any] = lambda: None) -> float:
    """The shortest of ``repeats`` timed calls ``run(prepare())`` (``time.perf_counter``); ``prepare`` (e.g. making
    fresh docs) runs outside the clock."""
    best = float("inf")
    for _ in range(repeats):
        prepared = prepare()
        start = time.perf_counter()
        run(prepared)
        best = min(best, time.perf_counter() - start)
    return best


def fresh_docs(vocab, word_lists: list[list[str]]) -> list:
    """New docs of ``word_lists`` (gold tokens, no annotations): every timed pass starts from unprocessed docs."""
    from spacy.tokens import Doc

    return [Doc(vocab, words=words) for words in word_lists]


def timed_pipe(
    nlp, word_lists: list[list[str]], batch_size: int, repeats: int, keep: bool = False
) -> tuple[float, list]:
    """(best seconds, the docs of the last pass if ``keep``) of ``nlp.pipe`` over fresh docs of ``word_lists``:
    one warm-up batch first, then the best of ``repeats`` passes."""
    out: list = []

    def run(docs: list) -> None:
        if keep:
            out[:] = nlp.pipe(docs, batch_size=batch_size)
        else:
            for _doc in nlp.pipe(docs, batch_size=batch_size):
                pass

    list(nlp.pipe(fresh_docs(nlp.vocab, word_lists[:batch_size]), batch_size=batch_size))
    return best_seconds(run, repeats, lambda: fresh_docs(nlp.vocab, word_lists)), out


def pipe_rate(nlp, word_lists: list[list[str]], batch_size: int, repeats: int) -> tuple[float, float]:
    """(sentences/s, words/s) of ``nlp.pipe`` on fresh docs: one warm-up batch, then the best of ``repeats``."""
    seconds, _ = timed_pipe(nlp, word_lists, batch_size, repeats)
    return len(word_lists) / seconds, sum(len(words) for words in word_lists) / seconds


def peak_rss_mb(process=None) -> float:
    """A process's (psutil.Process; default: this one) peak resident set so far: VmHWM on Linux, else its RSS."""
    if process is None:
        import psutil

        process = psutil.Process()
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return process.memory_info().rss / 2**20


def rss_mb(process=None) -> float:
    """A process's (default: this one) resident set now, in MB."""
    if process is None:
        import psutil

        process = psutil.Process()
    return process.memory_info().rss / 2**20
