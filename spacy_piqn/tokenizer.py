"""The pipeline's tokenizer for raw text: spaCy's, optionally keeping hyphenated words whole.

A model trained on a corpus's own tokens finds most when ``nlp(text)`` makes the same tokens. spaCy's
English rules split a hyphen between letters (``NF-kappa`` → ``NF``, ``-``, ``kappa``: OntoNotes' style),
while GENIA and CoNLL-03 keep such words whole: on GENIA dev as text, models trained on the gold tokens score
67.7 / 68.1 F through spaCy's rules and 76.7 / 76.6 with hyphenated words kept whole (77.0 / 76.7 on the gold
tokens; docs/configuration.md, "Tokens"). Likewise spaCy keeps a period after a capital letter on the word, as an
initial (``J. Smith``), where biomedical text ends a sentence with ``NF-kappa B.``: the entity's end then falls inside
a token. ``hyphen_mismatch`` and ``period_mismatch`` tell a user whose corpus and tokenizer disagree.
"""

import re
from collections import Counter
from typing import Callable, Iterable, Optional

from spacy.lang.char_classes import ALPHA_UPPER, HYPHENS
from spacy.language import Language, create_tokenizer
from spacy.tokenizer import Tokenizer
from spacy.tokens import Doc
from spacy.util import compile_infix_regex, compile_suffix_regex, registry

from .errors import Warnings

# A hyphen between two letters inside one token: the corpus keeps hyphenated words whole.
HYPHENATED = re.compile(rf"[^\W\d_](?:{HYPHENS})[^\W\d_]")
# A token that is only a hyphen (between two words: the corpus splits hyphenated words, or writes a dash).
HYPHEN = re.compile(rf"^(?:{HYPHENS})$")
# spaCy's infix rules that split at a hyphen between digits (English / French / multi-language, German), and what
# ``split_hyphens = false`` makes of them: ranges, scores and dates (``3-4``, ``2-1``, ``1996-08-30``) stay whole, as
# GENIA, CoNLL-03 and GermEval 2014 keep them (101 / 2,655 / 180 such tokens in their training data against 1 / 61 /
# 14 split). None: the rule is left out.
DIGIT_HYPHEN_INFIXES = {r"(?<=[0-9])[+\-\*^](?=[0-9-])": r"(?<=[0-9])[+\*^](?=[0-9-])", r"(?<=[0-9])-(?=[0-9])": None}
# A period after a capital letter, unless the capital follows a period (``U.S.``, ``Ph.D.``: chains of initials).
PERIOD_AFTER_CAPITAL = rf"(?<=[{ALPHA_UPPER}])(?<!\.[{ALPHA_UPPER}])\."
# A word ending in a capital that follows no capital or period (``B``, ``JunD``, ``IL-2R``; not ``DNA``, ``U.S``): the
# words whose full stop ``split_capital_periods`` decides, in the corpus as separate tokens or attached (``J.``).
ENDS_IN_CAPITAL = re.compile(rf"(?<![{ALPHA_UPPER}.])[{ALPHA_UPPER}]$")
CAPITAL_PERIOD = re.compile(rf"(?<![{ALPHA_UPPER}.])[{ALPHA_UPPER}]\.$")
# Fewer hyphenated words than this in the sample say nothing either way.
MIN_EVIDENCE = 20


@registry.tokenizers("spacy-piqn.Tokenizer.v1")
def create_piqn_tokenizer(
    split_hyphens: bool = True, split_capital_periods: bool = False
) -> Callable[[Language], Tokenizer]:
    """spaCy's tokenizer for the pipeline's language (``spacy.Tokenizer.v1``). With ``split_hyphens = false``
    it leaves out the language's infix rules that split at a hyphen between letters or digits, so ``T-cell`` and
    ``3-4`` stay one token (prefixes, suffixes and the other infixes are unchanged: ``(NF-kappa B).`` → ``(``,
    ``NF-kappa``, ``B``, ``)``, ``.``; ``5+3`` is still split). With
    ``split_capital_periods = true`` it also splits the period off a word that ends in a capital letter
    (``NF-kappa B.``, ``JunD.``), which spaCy keeps as an initial: ``J. Smith`` becomes ``J``, ``.``, ``Smith``,
    whose entity still aligns, while a kept ``B.`` puts the end of ``NF-kappa B`` inside a token. The language's
    exceptions and chains of initials (``U.S.``, ``Ph.D.``, ``Jun.``) stay whole. The rules are saved with the
    pipeline, as spaCy's own tokenizer's are."""
    make_default = create_tokenizer()

    def make(nlp: Language) -> Tokenizer:
        tokenizer = make_default(nlp)
        if not split_hyphens:
            infixes = [DIGIT_HYPHEN_INFIXES.get(rule, rule) for rule in nlp.Defaults.infixes or []]
            infixes = [rule for rule in infixes if rule is not None and HYPHENS not in rule]
            tokenizer.infix_finditer = compile_infix_regex(infixes).finditer if infixes else None
        if split_capital_periods:
            suffixes = [*(nlp.Defaults.suffixes or []), PERIOD_AFTER_CAPITAL]
            tokenizer.suffix_search = compile_suffix_regex(suffixes).search
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


def period_mismatch(nlp: Language, docs: Iterable[Doc]) -> Optional[str]:
    """A warning when the pipeline's tokenizer treats the full stop after a capital letter unlike the training
    docs, else None: W007 when they mostly split it off (``NF-kappa B`` ``.``) and the tokenizer keeps it on (an
    entity ending there before a full stop can then not be found in ``nlp(text)``), W008 when they mostly keep it on
    (initials: ``J.``) and the tokenizer splits it (the model meets tokens it did not train on)."""
    separate: Counter = Counter()
    attached: Counter = Counter()
    for doc in docs:
        for token in doc:
            if CAPITAL_PERIOD.search(token.text):
                attached[token.text] += 1
            elif ENDS_IN_CAPITAL.search(token.text) and token.i + 1 < len(doc) and doc[token.i + 1].text == ".":
                separate[token.text + "."] += 1
    n_separate, n_attached = sum(separate.values()), sum(attached.values())
    if n_separate >= MIN_EVIDENCE and n_separate > n_attached:
        kept = {word: n for word, n in separate.items() if len(nlp.tokenizer(word)) == 1}
        if sum(kept.values()) * 2 > n_separate:
            word = max(kept, key=kept.__getitem__)
            return Warnings.W007.format(n=sum(kept.values()), total=n_separate, word=word)
    elif n_attached >= MIN_EVIDENCE and n_attached > n_separate:
        split = {word: n for word, n in attached.items() if len(nlp.tokenizer(word)) > 1}
        if sum(split.values()) * 2 > n_attached:
            word = max(split, key=split.__getitem__)
            return Warnings.W008.format(n=sum(split.values()), total=n_attached, word=word)
    return None
