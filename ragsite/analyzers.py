"""A collection's analyzer: how a text becomes the terms its keyword (BM25) leg indexes and asks with.

Every analyzer starts from seed 004's terms (`lexical.terms`: maximal runs of Unicode letters, digits
and "_", lowercased as Go does) and maps each of them to one or more terms of its own:

* ``simple``: the seed's terms as they are (the default, and what the ``rag/<index_id>/`` export always
  uses, whatever a collection searches with);
* a Snowball language (``english``, ``french``, ``german``, …): each term stemmed by that language's
  Snowball stemmer (PyStemmer, the C libstemmer), so "policies" and "policy" are one term ("polici");
* ``cjk``: a run of Han, Hiragana, Katakana or Hangul characters inside a term becomes its overlapping
  character bigrams (a lone character stays a unigram), the rest of the term stays as it is. Chinese and
  Japanese are written without spaces, so the seed's rule makes a whole sentence one term and a question
  never matches it; bigrams are what Lucene's CJKAnalyzer indexes (CJKBigramFilter) for the same reason.

Because every analyzer is a map from one seed term to a tuple of terms, an index's postings under any
analyzer follow from its postings under ``simple`` (`expansions` of the distinct terms only): the
builder keeps its fast byte tokenizer (collections_app/index/byte_terms.py) and stems each distinct
term once. docs/decisions/0086-analyzers.md records the choices.

Pure: no models, no settings; the default analyzer is a setting read in `collections_app.conf`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache

import Stemmer

from .lexical import terms as simple_terms

SIMPLE = "simple"
CJK = "cjk"
# The Snowball stemmers offered, by PyStemmer's own names (PyStemmer 3.1, Snowball 3.0). A fixed list
# rather than Stemmer.algorithms() at run time: a stored collection's analyzer must keep meaning the
# same stemmer, and the model field's choices must not move with the installed package
# (tests/test_analyzers.py checks each is available). "porter" and "dutch_porter" are left out: they
# are older variants of english and dutch kept by Snowball for compatibility, not other languages.
SNOWBALL_LANGUAGES = (
    "arabic",
    "armenian",
    "basque",
    "catalan",
    "czech",
    "danish",
    "dutch",
    "english",
    "esperanto",
    "estonian",
    "finnish",
    "french",
    "german",
    "greek",
    "hindi",
    "hungarian",
    "indonesian",
    "irish",
    "italian",
    "lithuanian",
    "nepali",
    "norwegian",
    "persian",
    "polish",
    "portuguese",
    "romanian",
    "russian",
    "serbian",
    "sesotho",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
    "yiddish",
)
# "<language>_exact": the language's stems and the exact terms both (`StemAndExact`).
EXACT_SUFFIX = "_exact"
EXACT_LANGUAGES = tuple(f"{language}{EXACT_SUFFIX}" for language in SNOWBALL_LANGUAGES)
ANALYZERS = (SIMPLE, CJK, *SNOWBALL_LANGUAGES, *EXACT_LANGUAGES)
# The longest name, for the model field.
NAME_MAX_LENGTH = 20
# What a stem is prefixed with under a `StemAndExact` analyzer, so it is a term of its own beside the
# exact form even where the two are spelt alike: no seed-004 term holds "~" (they are runs of letters,
# digits and "_"), so a stem never meets an exact term.
STEM_MARK = "~"

# Han (CJK Unified Ideographs and extensions A-H, compatibility ideographs), Hiragana, Katakana (with
# its phonetic extensions and half-width forms) and Hangul (syllables and jamo): the scripts written
# without spaces between words, or (Hangul) whose words are long compounds. Each is a term character
# in seed 004's class, so these runs arrive inside its terms.
_CJK_CHARACTERS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7af"  # Hangul Syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff66-\uff9f"  # Half-width Katakana
    "\uffa0-\uffdc"  # Half-width Hangul
    "\U00020000-\U0003134f"  # CJK Unified Ideographs Extensions B-H, Compatibility Supplement
)
_CJK_RUN = re.compile(f"([{_CJK_CHARACTERS}]+)")


class UnknownAnalyzer(ValueError):
    """An analyzer name that is not one of `ANALYZERS`."""


class Analyzer:
    """One analyzer: its name, the terms of a text, and each seed term's terms (`expand`)."""

    name: str

    def expand(self, term: str) -> tuple[str, ...]:
        """The terms this analyzer makes of one seed-004 term (never empty for a non-empty term)."""
        raise NotImplementedError

    def expansions(self, vocabulary: Sequence[str]) -> list[tuple[str, ...]]:
        """`expand` of each term of ``vocabulary``, in order (an index's distinct terms, once each)."""
        return [self.expand(term) for term in vocabulary]

    def terms(self, text: str) -> list[str]:
        """The terms of ``text``, in order, repeats kept: each seed term's `expand`, in turn."""
        return [term for seed in simple_terms(text) for term in self.expand(seed)]

    @property
    def is_simple(self) -> bool:
        """Whether the terms are seed 004's own (no mapping to apply)."""
        return False

    def __repr__(self) -> str:
        return f"<analyzer {self.name}>"


class Simple(Analyzer):
    name = SIMPLE

    def expand(self, term: str) -> tuple[str, ...]:
        return (term,)

    def expansions(self, vocabulary: Sequence[str]) -> list[tuple[str, ...]]:
        return [(term,) for term in vocabulary]

    def terms(self, text: str) -> list[str]:
        return simple_terms(text)

    @property
    def is_simple(self) -> bool:
        return True


class Snowball(Analyzer):
    """Each term stemmed by the language's Snowball stemmer.

    A PyStemmer ``Stemmer`` object is not safe to share between threads (its documentation says so: it
    holds the C stemmer's working buffer), so each thread gets its own; each keeps PyStemmer's cache of
    recent words, which is what makes stemming a question's few terms nearly free.
    """

    def __init__(self, language: str) -> None:
        self.name = self.language = language
        self._local = threading.local()

    def _stemmer(self) -> Stemmer.Stemmer:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = Stemmer.Stemmer(self.language)
        return stemmer

    def expand(self, term: str) -> tuple[str, ...]:
        return (self._stemmer().stemWord(term),)

    def expansions(self, vocabulary: Sequence[str]) -> list[tuple[str, ...]]:
        return [(stem,) for stem in self._stemmer().stemWords(list(vocabulary))]

    def terms(self, text: str) -> list[str]:
        return self._stemmer().stemWords(simple_terms(text))


class StemAndExact(Snowball):
    """Each term twice: as it is, and its Snowball stem marked with `STEM_MARK`.

    Elasticsearch's multi-field "most_fields" pattern in one index: a question term scores where the
    paragraph holds its stem (so "policies" meets "policy") and again where it holds the exact form, so
    an exact match counts on top. Each half keeps its own idf: a rare form ("vacuuming") stays telling
    where stemming alone merges it with a common one ("vacuum") that every paragraph of a chapter holds
    (docs/decisions/0097). Both halves double every row's length alike, so BM25's length normalisation
    is unchanged.
    """

    def __init__(self, language: str) -> None:
        super().__init__(language)
        self.name = f"{language}{EXACT_SUFFIX}"

    def expand(self, term: str) -> tuple[str, ...]:
        return (term, STEM_MARK + self._stemmer().stemWord(term))

    def expansions(self, vocabulary: Sequence[str]) -> list[tuple[str, ...]]:
        words = list(vocabulary)
        stems = self._stemmer().stemWords(words)
        return [(term, STEM_MARK + stem) for term, stem in zip(words, stems, strict=True)]

    def terms(self, text: str) -> list[str]:
        return [term for pair in self.expansions(simple_terms(text)) for term in pair]


class Bigrams(Analyzer):
    """CJK runs as overlapping character bigrams; every other part of a term as it is."""

    name = CJK

    def expand(self, term: str) -> tuple[str, ...]:
        return _cjk_expand(term)


# Bounded: a long-lived search process meets an open-ended set of question terms.
@lru_cache(maxsize=1 << 16)
def _cjk_expand(term: str) -> tuple[str, ...]:
    if term.isascii():
        return (term,)
    pieces = _CJK_RUN.split(term)
    if len(pieces) == 1:  # no CJK character
        return (term,)
    out: list[str] = []
    # split() with a group alternates: outside, run, outside, run, …, outside (outsides may be "").
    for i, piece in enumerate(pieces):
        if not piece:
            continue
        if i % 2 == 0 or len(piece) == 1:
            out.append(piece)
        else:
            out.extend(piece[j : j + 2] for j in range(len(piece) - 1))
    return tuple(out)


@cache
def analyzer(name: str) -> Analyzer:
    """The analyzer called ``name``; `UnknownAnalyzer` names the choices for any other name."""
    if name == SIMPLE:
        return Simple()
    if name == CJK:
        return Bigrams()
    if name in SNOWBALL_LANGUAGES:
        return Snowball(name)
    if name in EXACT_LANGUAGES:
        return StemAndExact(name.removesuffix(EXACT_SUFFIX))
    raise UnknownAnalyzer(f"analyzer must be one of {', '.join(ANALYZERS)}, not {name!r}")


def check_name(name: object) -> str:
    """``name`` when it is an analyzer's name, else `UnknownAnalyzer` naming the choices."""
    if not isinstance(name, str) or name not in ANALYZERS:
        raise UnknownAnalyzer(f"analyzer must be one of {', '.join(ANALYZERS)}, not {name!r}")
    return name


def terms_of(name: str, texts: Iterable[str]) -> list[list[str]]:
    """Each text's terms under analyzer ``name`` (what an in-memory BM25 index is built from)."""
    analyze = analyzer(name).terms
    return [analyze(text) for text in texts]


__all__ = [
    "ANALYZERS",
    "CJK",
    "EXACT_LANGUAGES",
    "NAME_MAX_LENGTH",
    "SIMPLE",
    "SNOWBALL_LANGUAGES",
    "STEM_MARK",
    "Analyzer",
    "StemAndExact",
    "UnknownAnalyzer",
    "analyzer",
    "check_name",
    "terms_of",
]
