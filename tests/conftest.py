"""Shared fixtures: tiny nested-entity examples and a tiny, fast piqn configuration."""

import os

# One torch thread per process: the tests' tiny models gain nothing from more, and test
# subprocesses (spacy train, spacy project) would otherwise oversubscribe a 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# Small enough to overfit in a few seconds on 2 CPU cores.
TINY_PIQN = {
    "model": {
        "head": {
            "hidden_width": 32,
            "n_queries": 8,
            "n_layers": 2,
            "n_heads": 4,
            "pointer_width": 16,
            "dropout": 0.0,
            "classifier_dropout": 0.0,
        }
    },
    "n_slots": 4,
    # NESTED_DATA has "IL-2 gene" (DNA) inside "IL-2 gene promoter" (DNA): a gold nest that the
    # default merge of same-label nests sharing a boundary would drop.
    "merge_nested_duplicates": False,
}

NESTED_DATA: List[Tuple[str, List[Tuple[int, int, str]]]] = [
    (
        "The IL-2 gene promoter binds NF-kappa B in human T cells .",
        [(1, 2, "protein"), (1, 3, "DNA"), (1, 4, "DNA"), (5, 7, "protein"), (8, 11, "cell_type")],
    ),
    ("Jurkat cells express IL-4 .", [(0, 2, "cell_line"), (3, 4, "protein")]),
    ("No entities here .", []),
    ("IL-4 mRNA was found in T cells .", [(0, 1, "protein"), (0, 2, "RNA"), (5, 7, "cell_type")]),
]


def make_examples(
    nlp: Language, data: Sequence[Tuple[str, List[Tuple[int, int, str]]]], key: str = "sc"
) -> List[Example]:
    """Examples on gold tokens (whitespace-split text) with nested spans under ``key``."""
    examples = []
    for text, spans in data:
        words = text.split()
        ref = Doc(nlp.vocab, words=words)
        ref.spans[key] = [Span(ref, s, e, label=label) for s, e, label in spans]
        examples.append(Example(Doc(nlp.vocab, words=words), ref))
    return examples


def one_doc_of_sentences(nlp: Language, sentences: Sequence[Tuple[str, List[Tuple[int, int, str]]]], key: str = "sc"):
    """One Example whose doc is all ``sentences`` in a row, with sentence starts set.
    RETURNS (Example, make_doc, gold): make_doc(vocab) builds the unannotated doc again."""
    words, sent_starts, gold = [], [], []
    for text, spans in sentences:
        offset = len(words)
        tokens = text.split()
        words += tokens
        sent_starts += [True] + [False] * (len(tokens) - 1)
        gold += [(s + offset, e + offset, label) for s, e, label in spans]

    def make_doc(vocab):
        return Doc(vocab, words=words, sent_starts=sent_starts)

    ref = make_doc(nlp.vocab)
    ref.spans[key] = [Span(ref, s, e, label=label) for s, e, label in gold]
    return Example(make_doc(nlp.vocab), ref), make_doc, gold


def train_examples(nlp: Language, examples: List[Example], steps: int, learn_rate: float = 0.005) -> Dict[str, float]:
    """Initialize ``nlp`` on ``examples`` and update ``steps`` times. RETURNS the last losses."""
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = learn_rate
    losses: Dict[str, float] = {}
    for _ in range(steps):
        losses = nlp.update(examples, sgd=optimizer)
    return losses


def spans_of(doc: Doc, key: str = "sc") -> List[Tuple[int, int, str]]:
    return [(s.start, s.end, s.label_) for s in doc.spans[key]]


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """torch runs on one intra-op thread in every test, whatever OMP_NUM_THREADS says: a seeded training run then
    gives the same floats however busy the machine is, and a 2-core machine shared with other jobs does not stall
    (two threads on two busy cores made a 300-step loop take 10 minutes instead of 10 s)."""
    import torch

    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n_threads)


@pytest.fixture
def nested_examples():
    nlp = spacy.blank("en")
    return nlp, make_examples(nlp, NESTED_DATA)


def train_tiny(steps: int = 500, config=None, data=NESTED_DATA, seed: int = 0, learn_rate: float = 0.005):
    """A tiny piqn pipeline overfit on ``data``: trains until it reproduces the gold exactly
    (checked every 25 steps) or ``steps`` run out. A high learning rate gets there in seconds."""
    from thinc.api import fix_random_seed

    fix_random_seed(seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("piqn", config=config or TINY_PIQN)
    examples = make_examples(nlp, data)
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = learn_rate
    for step in range(1, steps + 1):
        nlp.update(examples, sgd=optimizer)
        if step % 25 == 0 and nlp.evaluate(examples)["spans_sc_f"] == 1.0:
            break
    return nlp, examples


@pytest.fixture(scope="session")
def trained_tiny():
    """One overfit pipeline shared by the tests that only read from it."""
    return train_tiny()
