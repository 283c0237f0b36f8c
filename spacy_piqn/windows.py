"""Where the PIQN head looks: docs are cut into windows so that long docs and docs with more
entities than queries are covered whole (the official code drops docs over 512 subwords)."""

from typing import Callable, List, NamedTuple

from spacy.tokens import Doc
from spacy.util import registry

from .errors import Errors


class Window(NamedTuple):
    """Tokens [start, end) of docs[doc]."""

    doc: int
    start: int
    end: int


GetWindows = Callable[[List[Doc]], List[Window]]


def split_range(start: int, end: int, size: int, stride: int) -> List[Window]:
    """Cover [start, end) with windows of at most ``size`` tokens, ``stride`` apart, so that
    every span of up to ``size - stride + 1`` tokens lies whole inside some window."""
    spans = [(start, min(start + size, end))]
    while spans[-1][1] < end:
        begin = spans[-1][0] + stride
        spans.append((begin, min(begin + size, end)))
    return [Window(-1, s, e) for s, e in spans]


@registry.misc("spacy-piqn.token_windows.v1")
def configure_token_windows(size: int = 128, stride: int = 96, use_sents: bool = True) -> GetWindows:
    """Windows of at most ``size`` tokens.

    size (int): the longest window, in tokens.
    stride (int): the step between consecutive windows of a long stretch; ``size - stride``
        tokens overlap, so entities up to that length + 1 near a cut are still seen whole.
    use_sents (bool): one window per sentence when the doc has sentence boundaries (longer
        sentences are split as above). Entities that cross a sentence boundary then cannot be
        predicted; training logs how many gold spans that leaves out.
    """
    if not 0 < stride <= size:
        raise ValueError(Errors.E016.format(stride=stride, size=size))

    def get_windows(docs: List[Doc]) -> List[Window]:
        windows = []
        for i, doc in enumerate(docs):
            if len(doc) == 0:
                continue
            if use_sents and doc.has_annotation("SENT_START"):
                stretches = [(sent.start, sent.end) for sent in doc.sents]
            else:
                stretches = [(0, len(doc))]
            for start, end in stretches:
                windows.extend(Window(i, w.start, w.end) for w in split_range(start, end, size, stride))
        return windows

    return get_windows
