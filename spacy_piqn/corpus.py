"""Corpus reader that trains and evaluates on the gold tokens.

spaCy's ``spacy.Corpus.v1`` re-tokenizes the reference text with the pipeline's tokenizer, so
gold spans whose boundaries fall inside a spaCy token (``NF-kappa``) are lost, and its
``gold_preproc``/``max_length`` options drop ``doc.spans``. This reader keeps both, and keeps the
reference docs in memory once read: a DocBin costs ~1 ms per doc to read back (srsly looks up its
msgpack extensions for each doc's user data and span groups), and ``spacy train`` reads the training
corpus once per component that initializes from it, the dev corpus at every evaluation.
"""

import random
from pathlib import Path
from typing import Callable, Iterator, List, Union

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Corpus, Example
from spacy.training.corpus import FILE_TYPE, walk_corpus
from spacy.util import registry


@registry.readers("spacy-piqn.Corpus.v1")
def create_gold_token_corpus(
    path: Union[str, Path],
    gold_tokens: bool = True,
    limit: int = 0,
    shuffle: bool = False,
    sent_starts: bool = False,
    cache: bool = True,
) -> Callable[[Language], Iterator[Example]]:
    """Examples from a DocBin (file or directory).

    path (Path): the ``.spacy`` file(s).
    gold_tokens (bool): predicted docs use the reference's tokens; False: the pipeline's tokenizer re-tokenizes
        the reference's text (spaCy's own reader keeps the tokens of docs whose spaces are unknown, as those from
        ``python -m spacy_piqn convert``), so a model learns the tokens ``nlp(text)`` will give it.
    limit (int): read at most this many docs (0: all).
    shuffle (bool): shuffle the docs each time the corpus is read (training).
    sent_starts (bool): predicted docs get the reference's sentence boundaries (re-tokenized: at the tokens that
        begin where a reference sentence begins), so that piqn trains on the gold sentences while a sentence
        splitter in the pipeline (e.g. a ``senter`` trained with it) sets them at prediction. False: predicted docs
        carry no sentence boundaries, as raw text.
    cache (bool): keep the reference docs after the first complete read and hand them out again (each time with
        fresh predicted docs) to every later read with the same vocab; False reads the files every time, as
        ``spacy.Corpus.v1`` does, for a corpus too large for memory (e.g. streamed with ``max_epochs = -1``).
    """
    corpus = Corpus(path, limit=limit, gold_preproc=False, max_length=0)
    cached: List = []  # [vocab, docs] after a complete read

    def references(nlp: Language) -> Iterator[Doc]:
        if cached and cached[0] is nlp.vocab:
            yield from cached[1]
            return
        docs = []
        for doc in corpus.read_docbin(nlp.vocab, walk_corpus(corpus.path, FILE_TYPE)):
            if cache:
                docs.append(doc)
            yield doc
        if cache:
            cached[:] = [nlp.vocab, docs]

    def read(nlp: Language) -> Iterator[Example]:
        refs: Iterator[Doc] = references(nlp)
        if shuffle:
            refs = list(refs)  # type: ignore[assignment]
            random.shuffle(refs)  # type: ignore[arg-type]
        for ref in refs:
            if gold_tokens:
                words = [t.text for t in ref]
                spaces = [bool(t.whitespace_) for t in ref]
                starts = (
                    [bool(t.is_sent_start) for t in ref] if sent_starts and ref.has_annotation("SENT_START") else None
                )
                yield Example(Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=starts), ref)
            else:
                doc = nlp.make_doc(ref.text)
                if sent_starts and ref.has_annotation("SENT_START"):
                    starts_at = {t.idx for t in ref if t.is_sent_start}
                    for token in doc:
                        token.is_sent_start = token.idx in starts_at
                yield Example(doc, ref)

    return read
