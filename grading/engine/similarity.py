"""Text similarity metrics for `text_similarity` checks, each in [0, 1].

Tokens are lower-cased runs of word characters (`\\w+`). ROUGE-L and BLEU are
implemented here (small, documented) rather than pulled in as dependencies; the
longest common subsequence comes from rapidfuzz's bit-parallel LCSseq.
"""

from __future__ import annotations

import math
import re
from collections import Counter


_TOKEN = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _TOKEN.findall(text.lower())


def fuzzy(candidate: str, reference: str) -> float:
    """rapidfuzz `ratio` (normalised Indel similarity) of lower-cased, whitespace-collapsed texts."""
    from rapidfuzz import fuzz  # imported here: the bundled grader needs it only for this metric

    a = _SPACE.sub(" ", candidate.lower()).strip()
    b = _SPACE.sub(" ", reference.lower()).strip()
    if not a and not b:
        return 1.0
    return fuzz.ratio(a, b) / 100.0


def rouge_l(candidate: list[str] | str, reference: list[str] | str) -> float:
    """ROUGE-L F1: LCS-based precision P = lcs/|candidate|, recall R = lcs/|reference|, F = 2PR/(P+R)."""
    cand = tokens(candidate) if isinstance(candidate, str) else candidate
    ref = tokens(reference) if isinstance(reference, str) else reference
    if not cand or not ref:
        return 1.0 if not cand and not ref else 0.0
    from rapidfuzz.distance import LCSseq

    lcs = LCSseq.similarity(cand, ref)
    if lcs == 0:
        return 0.0
    precision = lcs / len(cand)
    recall = lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def _ngrams(words: list[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def bleu(candidate: list[str] | str, reference: list[str] | str, max_n: int = 4) -> float:
    """Sentence BLEU against one reference.

    Geometric mean of clipped n-gram precisions for n = 1..max_n (uniform
    weights); unigram precision is unsmoothed, n ≥ 2 use add-one smoothing
    (Lin & Och 2004) so a short answer is not zeroed by a missing 4-gram;
    times the brevity penalty exp(1 − r/c) when the candidate is shorter.
    """
    cand = tokens(candidate) if isinstance(candidate, str) else candidate
    ref = tokens(reference) if isinstance(reference, str) else reference
    if not cand or not ref:
        return 1.0 if not cand and not ref else 0.0
    log_sum = 0.0
    for n in range(1, max_n + 1):
        cand_grams = _ngrams(cand, n)
        ref_grams = _ngrams(ref, n)
        total = sum(cand_grams.values())
        matched = sum(min(count, ref_grams[gram]) for gram, count in cand_grams.items())
        if n == 1:
            if matched == 0:
                return 0.0
            precision = matched / total
        else:
            precision = (matched + 1) / (total + 1)
        log_sum += math.log(precision) / max_n
    brevity = 1.0 if len(cand) > len(ref) else math.exp(1 - len(ref) / len(cand))
    return min(1.0, brevity * math.exp(log_sum))


METRICS = {"fuzzy": fuzzy, "rouge_l": rouge_l, "bleu": bleu}
