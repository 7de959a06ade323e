"""Text similarity metrics for `text_similarity` checks, each in [0, 1].

Tokens are lower-cased runs of word characters (`\\w+`). ROUGE-L and BLEU are
implemented here (small, documented) rather than pulled in as dependencies; the
longest common subsequence comes from rapidfuzz's bit-parallel LCSseq.
"""

from __future__ import annotations

import math
import re
from collections import Counter

# Imported with the module, not on a check's first use: the engine is imported before any check runs (and
# before a trainer's thread pool starts), so no check pays for the import inside its CPU budget.
from rapidfuzz import fuzz
from rapidfuzz.distance import LCSseq

_TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _TOKEN.findall(text.lower())


def normalise(text: str) -> str:
    """Case-folded, whitespace runs collapsed to one space, stripped (what `fuzzy` compares)."""
    return " ".join(text.casefold().split())


def fuzzy(candidate: str, reference: str, *, normalised: bool = False) -> float:
    """rapidfuzz `ratio` (normalised Indel similarity) of case-folded, whitespace-collapsed texts."""
    a = candidate if normalised else normalise(candidate)
    b = reference if normalised else normalise(reference)
    if not a and not b:
        return 1.0
    return fuzz.ratio(a, b) / 100.0


def rouge_l(candidate: list[str] | str, reference: list[str] | str) -> float:
    """ROUGE-L F1: LCS-based precision P = lcs/|candidate|, recall R = lcs/|reference|, F = 2PR/(P+R)."""
    cand = tokens(candidate) if isinstance(candidate, str) else candidate
    ref = tokens(reference) if isinstance(reference, str) else reference
    if not cand or not ref:
        return 1.0 if not cand and not ref else 0.0
    lcs = LCSseq.similarity(cand, ref)
    if lcs == 0:
        return 0.0
    precision = lcs / len(cand)
    recall = lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def joined(words: list[str]) -> str:
    """Tokens as " a b c " (tokens never contain spaces), for counting n-grams with str.find."""
    return " " + " ".join(words) + " "


def _count_up_to(haystack: str, needle: str, limit: int) -> int:
    """Occurrences of `needle` in `haystack` (overlapping), counting no further than `limit`."""
    count, at = 0, haystack.find(needle)
    while at >= 0 and count < limit:
        count += 1
        at = haystack.find(needle, at + 1)
    return count


def bleu(
    candidate: list[str] | str, reference: list[str] | str, max_n: int = 4, *, candidate_joined: str | None = None
) -> float:
    """Sentence BLEU against one reference.

    Geometric mean of clipped n-gram precisions for n = 1..max_n (uniform
    weights); unigram precision is unsmoothed, n ≥ 2 use add-one smoothing
    (Lin & Och 2004) so a short answer is not zeroed by a missing 4-gram;
    times the brevity penalty exp(1 − r/c) when the candidate is shorter.
    Clipped counts are found by searching the candidate for each reference
    n-gram (at most its reference count times), so a long candidate costs a
    few `str.find`s, not a Counter of all its n-grams.
    """
    cand = tokens(candidate) if isinstance(candidate, str) else candidate
    ref = tokens(reference) if isinstance(reference, str) else reference
    if not cand or not ref:
        return 1.0 if not cand and not ref else 0.0
    haystack = candidate_joined if candidate_joined is not None else joined(cand)
    log_sum = 0.0
    absent: set[tuple[str, ...]] = set()
    for n in range(1, max_n + 1):
        total = max(0, len(cand) - n + 1)
        ref_grams = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
        matched = 0
        for gram, count in ref_grams.items():
            # An n-gram whose (n-1)-gram head or tail is absent is absent too: skip the scan.
            if n > 1 and (gram[:-1] in absent or gram[1:] in absent):
                absent.add(gram)
                continue
            found = _count_up_to(haystack, joined(list(gram)), count)
            if found == 0:
                absent.add(gram)
            matched += found
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
