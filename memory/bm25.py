"""BM25 over one film's rows of one table, in process.

Why not LanceDB's full-text index: its statistics (row count, document frequencies, mean length)
are those of the whole table, every film of the library together, so adding a film changed the
rankings, and the answers, of every other film; and a query on it costs 1-1.5 ms a table on this
machine where scoring a film's own few thousand rows in numpy costs a tenth of that. Search here
reads only the film's own rows (search packs or LanceDB), so a film ranks the same in any library.

The analysis is LanceDB's `FTS(stem=True, remove_stop_words=True)` (what moviemem indexed with
before), checked against it in tests: split on anything not a letter or digit, drop tokens of 40
bytes or more, lower-case, Snowball English stem, drop stems that are English stop words, fold
accents. Scores are BM25 as LanceDB computes it (k1 1.2, b 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5)),
N and the mean length over rows that hold a term, a query term counted as often as it is written),
so that on one film's rows the scores equal LanceDB's to float precision (tested).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

K1 = 1.2
B = 0.75
MAX_TOKEN_BYTES = 40
_TOKEN = re.compile(r"[^\W_]+")  # a token: letters and digits (LanceDB's "simple" tokenizer)

# the English stop words of LanceDB's (tantivy's) stop-word filter, matched after stemming
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
this that that'll these those am is are was were be been being have has had having do does did doing a an the
and but if or because as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so than too very s t can will just
don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())


@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # PyStemmer: the Snowball stemmers in C (LanceDB's are the same algorithms in Rust)

    return Stemmer.Stemmer("english", 0)


_terms: dict[str, str] = {}  # lower-cased token -> its index term ("" for a stop word or a token too long)


def _fold(token: str) -> str:
    if token.isascii():
        return token
    return "".join(c for c in unicodedata.normalize("NFKD", token) if not unicodedata.combining(c))


def _learn(tokens: set[str]) -> dict[str, str]:
    """The tokens' index terms, stemming those not seen before in one call (the costly step).
    Returns its own mapping, so a cache cleared by another thread meanwhile loses nothing."""
    known = {t: term for t in tokens if (term := _terms.get(t)) is not None}
    new = [t for t in tokens if t not in known]
    if len(_terms) > 500_000:  # a bounded cache: film vocabularies are a few thousand words each
        _terms.clear()
    for token, stem in zip(new, _stemmer().stemWords(new) if new else [], strict=True):
        known[token] = _terms[token] = "" if stem in STOP_WORDS or len(token.encode()) >= MAX_TOKEN_BYTES else _fold(stem)
    return known


# one ASCII text (a query) is split by str methods, 3x faster than the regex; a film's texts are split
# at once as bytes (_split_rows); either way every ASCII character that is not a letter or digit
# separates tokens, as in the regex
_ASCII_BREAKS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
_MARK = "\x00"  # the row mark when a film's texts are split at once: no token holds it
_ROW = f" {_MARK} "  # between rows, so that the mark is a token of its own
_BYTE_BREAKS = bytes(c if c == ord(_MARK) or chr(c).isalnum() or c >= 128 else ord(" ") for c in range(256))


def _tokens(text: str) -> list[str]:
    if text.isascii():
        return text.lower().translate(_ASCII_BREAKS).split()
    return _TOKEN.findall(text.lower())


def _split_rows(texts: Sequence[str]) -> list[bytes]:
    """Every text's tokens (UTF-8) in order, with a row mark b"\\x00" between texts. The film's text
    is split in one bytes operation (str.translate or a call per text took 1.5-3 ms a film, most of
    its first query); a piece holding other than ASCII is split again by the regex, which gives the
    same tokens, since ASCII marks and spaces never belong to a token."""
    joined = _ROW.join(texts).lower()
    if joined.count(_MARK) != max(0, len(texts) - 1):  # a text holds the mark itself: one text at a time
        return [token.encode() for t in texts for token in [*_tokens(t), _MARK]][:-1]
    spaced = joined.encode().translate(_BYTE_BREAKS)
    pieces = spaced.split()
    if not joined.isascii():  # split the few pieces that hold other than ASCII again, by the regex
        byte = np.frombuffer(spaced, dtype=np.uint8)
        word = byte != ord(" ")
        piece = np.cumsum(word & ~np.concatenate(([False], word[:-1]))) - 1  # each byte's piece
        for i in reversed(np.unique(piece[byte >= 128]).tolist()):
            pieces[i:i + 1] = [t.encode() for t in _TOKEN.findall(pieces[i].decode())]
    return pieces


def analyze(text: str) -> list[str]:
    """A text's index terms, in order (a query's; a film's rows are analysed together by Bm25Index)."""
    tokens = _tokens(text)
    terms = _learn(set(tokens))
    return [term for term in map(terms.__getitem__, tokens) if term]


class Bm25Index:
    """An inverted index over a fixed list of texts (one film's rows of one table, one finished run):
    postings sorted by term, so a query term's rows and counts are two slices."""

    def __init__(self, texts: Sequence[str]):
        marked = _split_rows(texts)
        distinct = list(set(marked))
        at = dict(zip(distinct, range(len(distinct))))
        texts_of = [token.decode() for token in distinct]
        learned = _learn(set(texts_of) - {_MARK})
        vocab: dict[str, int] = {}
        term_ids = np.array([-2 if text == _MARK else vocab.setdefault(term, len(vocab)) if (term := learned[text]) else -1
                             for text in texts_of], dtype=np.int64)
        ids = term_ids[np.fromiter(map(at.__getitem__, marked), dtype=np.int64, count=len(marked))]
        mark = ids == -2
        rows = np.cumsum(mark)  # each token's row: the marks before it
        keep = ids >= 0
        ids, rows = ids[keep], rows[keep]
        self.size = len(texts)
        self.lengths = np.bincount(rows, minlength=self.size).astype(np.float32)
        self.counted = int(np.count_nonzero(self.lengths))  # rows with no term are not documents to BM25
        self.mean_length = float(self.lengths.sum()) / self.counted if self.counted else 1.0
        pairs, tf = np.unique(ids * max(self.size, 1) + rows, return_counts=True)  # sorted by term, then row
        self._vocab = vocab
        self._rows = (pairs % max(self.size, 1)).astype(np.int32)
        self._tf = tf.astype(np.float32)
        self._start = np.searchsorted(pairs // max(self.size, 1), np.arange(len(vocab) + 1))
        self._norm = K1 * (1.0 - B + B * self.lengths / self.mean_length)

    def scores(self, query: str) -> np.ndarray:
        """Every row's BM25 score for the query's terms; 0 where none occurs."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in analyze(query):
            t = self._vocab.get(term)
            if t is None:
                continue
            a, b = self._start[t], self._start[t + 1]
            rows, tf = self._rows[a:b], self._tf[a:b]
            idf = np.log(1.0 + (self.counted - (b - a) + 0.5) / ((b - a) + 0.5))
            out[rows] += idf * tf * (K1 + 1.0) / (tf + self._norm[rows])
        return out

    def top(self, query: str, mask: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The n best rows among those `mask` shows that hold a query term, best first (ties by row)."""
        scores = np.where(mask, self.scores(query), 0.0)
        hits = np.flatnonzero(scores > 0)
        if not len(hits) or n < 1:
            return []
        if len(hits) > n:
            hits = hits[np.argpartition(-scores[hits], n - 1)[:n]]
        hits = hits[np.lexsort((hits, -scores[hits]))]
        return [(int(i), float(scores[i])) for i in hits]
