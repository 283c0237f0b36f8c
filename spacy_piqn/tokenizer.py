"""The pipeline's tokenizer for raw text: spaCy's, optionally keeping hyphenated words whole.

A model trained on a corpus's own tokens finds most when ``nlp(text)`` makes the same tokens. spaCy's
English rules split a hyphen between letters (``NF-kappa`` → ``NF``, ``-``, ``kappa``: OntoNotes' style),
while GENIA and CoNLL-03 keep such words whole: on GENIA dev as text, models trained on the gold tokens score
67.7 / 68.1 F through spaCy's rules and 76.7 / 76.6 with hyphenated words kept whole (77.0 / 76.7 on the gold
tokens; docs/configuration.md, "Tokens"). ``hyphen_mismatch`` tells a user whose corpus and tokenizer disagree.
"""

import re
from collections import Counter
from typing import Callable, Iterable, Optional

from spacy.lang.char_classes import HYPHENS
from spacy.language import Language, create_tokenizer
from spacy.tokenizer import Tokenizer
from spacy.tokens import Doc
from spacy.util import compile_infix_regex, registry

from .errors import Warnings

# A hyphen between two letters inside one token: the corpus keeps hyphenated words whole.
HYPHENATED = re.compile(rf"[^\W\d_](?:{HYPHENS})[^\W\d_]")
# A token that is only a hyphen (between two words: the corpus splits hyphenated words, or writes a dash).
HYPHEN = re.compile(rf"^(?:{HYPHENS})$")
# Fewer hyphenated words than this in the sample say nothing either way.
MIN_EVIDENCE = 20


@registry.tokenizers("spacy-piqn.Tokenizer.v1")
def create_piqn_tokenizer(split_hyphens: bool = True) -> Callable[[Language], Tokenizer]:
    """spaCy's tokenizer for the pipeline's language (``spacy.Tokenizer.v1``); with ``split_hyphens = false``
    it leaves out the language's infix rules that split at a hyphen, so ``T-cell`` stays one token (prefixes,
    suffixes and the other infixes are unchanged: ``(NF-kappa B).`` → ``(``, ``NF-kappa``, ``B``, ``)``, ``.``).
    Languages whose rules never split hyphenated words (German) are the same either way. The rules are saved
    with the pipeline, as spaCy's own tokenizer's are."""
    make_default = create_tokenizer()

    def make(nlp: Language) -> Tokenizer:
        tokenizer = make_default(nlp)
        if not split_hyphens:
            infixes = [rule for rule in nlp.Defaults.infixes or [] if HYPHENS not in rule]
            tokenizer.infix_finditer = compile_infix_regex(infixes).finditer if infixes else None
        return tokenizer

    return make


def hyphen_mismatch(nlp: Language, docs: Iterable[Doc]) -> Optional[str]:
    """A warning (W005 / W006) when the pipeline's tokenizer treats hyphenated words unlike the training docs'
    tokens, else None: it splits words the corpus keeps whole (the model meets tokens it never saw), or keeps
    whole the words the corpus splits (an entity inside one can then not be found at all)."""
    whole: Counter = Counter()
    split = 0
    for doc in docs:
        for i, token in enumerate(doc):
            if HYPHENATED.search(token.text):
                whole[token.text] += 1
            elif HYPHEN.match(token.text) and 0 < i < len(doc) - 1 and doc[i - 1].is_alpha and doc[i + 1].is_alpha:
                split += 1
    n_whole = sum(whole.values())
    if n_whole >= MIN_EVIDENCE:
        # Split at the hyphen, not merely at attached punctuation (a gold token "T-cell," is two tokens either way).
        broken = {word: n for word, n in whole.items() if any(HYPHEN.match(t.text) for t in nlp.tokenizer(word))}
        if sum(broken.values()) * 2 > n_whole:
            example = max(broken, key=broken.__getitem__)
            pieces = " ".join(t.text for t in nlp.tokenizer(example))
            return Warnings.W005.format(n=sum(broken.values()), total=n_whole, word=example, pieces=pieces)
    elif split >= MIN_EVIDENCE and split > 10 * n_whole and len(nlp.tokenizer("well-known")) == 1:
        return Warnings.W006.format(n=split)
    return None
