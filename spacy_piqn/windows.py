"""Where the PIQN head looks: docs are cut into windows so that long docs and docs with more
entities than queries are covered whole (the official code drops docs over 512 subwords).

PIQN learns one sentence per window (the official code reads one sentence at a time, with its
neighbours as context), so windows follow sentences: those that spaCy's ``sentencizer`` rule finds,
and those a component before this one set (``senter``, ``parser``, ``sentencizer``). A window may
carry context: words around it that the head reads but never predicts on.
"""

import logging
from typing import Callable, Iterable, List, NamedTuple, Optional, Tuple

from spacy.pipeline import Sentencizer
from spacy.tokens import Doc
from spacy.util import registry
from spacy.vocab import Vocab

from .errors import Errors, Warnings

logger = logging.getLogger("spacy_piqn")


class Window(NamedTuple):
    """Tokens [start, end) of docs[doc] are predicted on; the head also reads ``left_context``
    tokens before them and ``right_context`` tokens after them."""

    doc: int
    start: int
    end: int
    left_context: int = 0
    right_context: int = 0

    @property
    def read_start(self) -> int:
        return self.start - self.left_context

    @property
    def read_end(self) -> int:
        return self.end + self.right_context


# Called as get_windows(docs, is_train): training and prediction may cut docs differently.
GetWindows = Callable[..., List[Window]]


def split_range(start: int, end: int, size: int, stride: int) -> List[Tuple[int, int]]:
    """Cover [start, end) with stretches of at most ``size`` tokens, ``stride`` apart, so that
    every span of up to ``size - stride + 1`` tokens lies whole inside some stretch."""
    spans = [(start, min(start + size, end))]
    while spans[-1][1] < end:
        begin = spans[-1][0] + stride
        spans.append((begin, min(begin + size, end)))
    return spans


def sentence_stretches(doc: Doc, rule: Sentencizer) -> List[Tuple[int, int]]:
    """(start, end) of each sentence: those of spaCy's ``sentencizer`` punctuation rule, plus the doc's own
    boundaries where a component set them (the doc itself is not changed). The rule's boundaries are kept
    alongside a component's so that one which finds too few (e.g. a ``senter`` trained on one sentence per Doc)
    never leaves whole paragraphs in one window."""
    starts = {i for i, is_start in enumerate(rule.predict([doc])[0]) if is_start}
    if doc.has_annotation("SENT_START"):
        starts.update(sent.start for sent in doc.sents)
    ordered = sorted(starts)
    return list(zip(ordered, ordered[1:] + [len(doc)]))


def _check_sizes(size: int, stride: int, prefix: str = "") -> None:
    if not 0 < stride <= size:
        raise ValueError(Errors.E016.format(p=prefix, stride=stride, size=size))


@registry.misc("spacy-piqn.token_windows.v3")
def configure_token_windows(
    size: int = 128,
    stride: int = 96,
    context: int = 0,
    predict_size: Optional[int] = None,
    predict_stride: Optional[int] = None,
) -> GetWindows:
    """One window per sentence (a longer sentence is cut into windows of at most ``size`` tokens).

    Sentences end where spaCy's ``sentencizer`` rule ends them and where a component before this one
    (``senter``, ``parser``, ``sentencizer``) set a boundary, so that raw text (``nlp(abstract)``) is
    read as the model was trained. Entities that cross a sentence boundary
    cannot be predicted; training logs how many gold spans that leaves out.

    size (int): the longest window, in tokens.
    stride (int): the step between consecutive windows of a long sentence; ``size - stride``
        tokens overlap, so entities up to that length + 1 near a cut are still seen whole.
    context (int): tokens of the surrounding doc on each side of a window that the head reads
        (BiLSTM and word-level layers) but never predicts on; 0: none. The official code reads the
        neighbouring sentences the same way.
    predict_size, predict_stride (Optional[int]): ``size`` and ``stride`` when predicting (evaluation
        included); None: as in training. Shorter windows at prediction give each window's queries fewer
        entities to find; the training windows that suit best depend on the corpus (docs/configuration.md).
    """
    _check_sizes(size, stride)
    predict_size = size if predict_size is None else predict_size
    predict_stride = stride if predict_stride is None else predict_stride
    _check_sizes(predict_size, predict_stride, "predict_")
    if context < 0:
        raise ValueError(Errors.E055.format(context=context))
    rule = Sentencizer()

    def get_windows(docs: List[Doc], is_train: bool = False) -> List[Window]:
        cut_size, cut_stride = (size, stride) if is_train else (predict_size, predict_stride)
        windows = []
        for i, doc in enumerate(docs):
            if len(doc) == 0:
                continue
            for start, end in _cut(sentence_stretches(doc, rule), cut_size, cut_stride):
                left, right = min(context, start), min(context, len(doc) - end)
                windows.append(Window(i, start, end, left, right))
        return windows

    return get_windows


@registry.misc("spacy-piqn.token_windows.v2")
def configure_token_windows_v2(size: int = 128, stride: int = 96, context: int = 0) -> GetWindows:
    """``spacy-piqn.token_windows.v3`` with the same windows in training and prediction (pipelines
    trained before v3)."""
    return configure_token_windows(size, stride, context)


@registry.misc("spacy-piqn.token_windows.v1")
def configure_token_windows_v1(size: int = 128, stride: int = 96, use_sents: bool = True) -> GetWindows:
    """Windows of at most ``size`` tokens (pipelines trained before ``token_windows.v2``).

    size, stride: as in ``spacy-piqn.token_windows.v2``.
    use_sents (bool): one window per sentence when the doc has sentence boundaries; a doc without
        them is cut into windows that mix sentences (W004 says so once per process).
    """
    _check_sizes(size, stride)
    warned = []

    def get_windows(docs: List[Doc], is_train: bool = False) -> List[Window]:
        windows = []
        for i, doc in enumerate(docs):
            if len(doc) == 0:
                continue
            if use_sents and doc.has_annotation("SENT_START"):
                stretches = [(sent.start, sent.end) for sent in doc.sents]
            else:
                stretches = [(0, len(doc))]
                if use_sents and not warned and len(doc) > 1:
                    logger.warning(Warnings.W004.format(doc=i, size=size))
                    warned.append(True)
            windows.extend(Window(i, start, end) for start, end in _cut(stretches, size, stride))
        return windows

    return get_windows


def _cut(stretches: Iterable[Tuple[int, int]], size: int, stride: int) -> List[Tuple[int, int]]:
    return [piece for start, end in stretches for piece in split_range(start, end, size, stride)]


def unseen_context(get_windows: GetWindows, docs: List[Doc]) -> Optional[str]:
    """W007 when windows read context words at prediction (``context`` > 0) but hardly any training window has any:
    the training docs are single sentences, so the model learned without context and meets it only in users'
    documents (on GermEval 2014, trained on sentences, ``context = 16`` cost 0.3-0.5 F on 10-sentence texts)."""
    two_sentences = Doc(Vocab(), words=["A", ".", "B", "."], sent_starts=[True, False, True, False])
    if not any(w.left_context or w.right_context for w in get_windows([two_sentences], is_train=False)):
        return None
    windows = get_windows(docs, is_train=True)
    with_context = sum(1 for w in windows if w.left_context or w.right_context)
    if windows and with_context * 10 < len(windows):
        return Warnings.W007.format(n=with_context, total=len(windows))
    return None
