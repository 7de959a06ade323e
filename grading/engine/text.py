"""Unicode normalisation of the text checks read: one rule for the answer, files, and the author's values.

An agent can write a forbidden phrase with a zero-width space inside it ("ki\\u200bll"), in fullwidth
letters ("ｋｉｌｌ") or with a soft hyphen, and a plain substring or pattern search no longer sees it,
while a human reader (and a judge) still does. So `string_match`, `regex`, `number`, `file_content`,
`table_cell` and `text_similarity` compare normalised text (docs/formats.md, "Text normalisation"):

1. every **invisible format character** is removed: Unicode category Cf (zero-width space U+200B,
   joiners U+200C/U+200D, word joiner U+2060, BOM U+FEFF, soft hyphen U+00AD, bidi marks, embeddings
   and isolates U+200E/F, U+202A-E, U+2066-9, tag characters U+E0000-E007F, ...) and the other
   Default_Ignorable_Code_Points of Unicode (combining grapheme joiner U+034F, variation selectors,
   Hangul fillers, Mongolian free variation selectors, Khmer inherent vowels): `_IGNORABLE_RANGES`;
2. then **NFKC**: compatibility forms become their plain letters, digits and punctuation (fullwidth
   "ｋｉｌｌ" → "kill", "①" → "1", the ligature "ﬁ" → "fi", a no-break space → a space), and
   combining sequences are composed ("e" + U+0301 → "é").

Before that, the characters after a right-to-left override (U+202E, up to its pop U+202C or the end
of the line) are reversed, into the order a reader sees them: "\u202ellik" shows as "kill" (other bidi
controls only move whole runs and are removed).

Removing first lets NFKC compose what an invisible character had split ("e", U+200D, U+0301 → "é"),
and NFKC never produces an ignorable character, so the result is stable: normalising it again
changes nothing (tests/grading/engine/test_text_judge_abuse.py proves both over every code point).

Letters of other scripts that merely look Latin (Cyrillic "а", Greek "ο") are different letters
with their own meaning, and are NOT folded: "Pаris" with a Cyrillic "а" does not equal "Paris".
An agent gains nothing on a positive check by writing them; against a penalty written in Latin
they are a way round it, which is why penalty phrases are better caught by an `llm_judge` check
(or a regex with a character class) than by an exact phrase alone (docs/formats.md says so).

Pure ASCII text is returned as it is, without work (the common case, and the pack's reward
function is measured for throughput). Callers cache per text per grade (`GradingContext`).
"""

from __future__ import annotations

import re
import unicodedata

# Unicode 16's Cf characters and the other Default_Ignorable_Code_Points (DerivedCoreProperties.txt),
# as ranges. A test checks that every Cf character of the running Python is here.
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),    # soft hyphen (Cf)
    (0x034F, 0x034F),    # combining grapheme joiner (Mn, default-ignorable)
    (0x0600, 0x0605),    # Arabic number signs (Cf)
    (0x061C, 0x061C),    # Arabic letter mark (Cf)
    (0x06DD, 0x06DD),    # Arabic end of ayah (Cf)
    (0x070F, 0x070F),    # Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),    # Arabic pound and piastre marks above (Cf)
    (0x08E2, 0x08E2),    # Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),    # Hangul choseong and jungseong fillers (default-ignorable)
    (0x17B4, 0x17B5),    # Khmer inherent vowels (default-ignorable)
    (0x180B, 0x180F),    # Mongolian free variation selectors and vowel separator
    (0x200B, 0x200F),    # zero-width space, ZWNJ, ZWJ, LRM, RLM (Cf)
    (0x202A, 0x202E),    # bidi embeddings and overrides (Cf)
    (0x2060, 0x206F),    # word joiner, invisible operators, bidi isolates, deprecated format chars
    (0x3164, 0x3164),    # Hangul filler (default-ignorable)
    (0xFE00, 0xFE0F),    # variation selectors 1-16 (default-ignorable)
    (0xFEFF, 0xFEFF),    # zero-width no-break space / BOM (Cf)
    (0xFFA0, 0xFFA0),    # halfwidth Hangul filler (default-ignorable)
    (0xFFF0, 0xFFFB),    # reserved default-ignorables and interlinear annotation characters (Cf)
    (0x110BD, 0x110BD),  # Kaithi number sign (Cf)
    (0x110CD, 0x110CD),  # Kaithi number sign above (Cf)
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls (Cf)
    (0x1BCA0, 0x1BCA3),  # shorthand format controls (Cf)
    (0x1D173, 0x1D17A),  # musical symbol beam and phrase controls (Cf)
    (0xE0000, 0xE0FFF),  # tag characters and variation selectors 17-256 (Cf, default-ignorable)
)

_IGNORABLE = re.compile(
    "[" + "".join(re.escape(chr(low)) + ("-" + re.escape(chr(high)) if high != low else "")
                  for low, high in _IGNORABLE_RANGES) + "]+"
)


def is_ignorable(char: str) -> bool:
    """True for a character `normalise_unicode` removes (a format or other default-ignorable character)."""
    return _IGNORABLE.fullmatch(char) is not None


# A right-to-left override (U+202E) shows the characters after it reversed, up to a pop (U+202C) or the end
# of the paragraph: "\u202ellik" reads "kill" on screen. Its span is put in the order a reader sees.
_RIGHT_TO_LEFT_OVERRIDE = re.compile("\u202e([^\u202c\n\r\u2029]*)")


def _shown_order(found: re.Match) -> str:
    return found.group(1)[::-1]


def normalise_unicode(text: str) -> str:
    """`text` without format (Cf) and other default-ignorable characters, then in NFKC (see the module doc)."""
    if text.isascii():
        return text
    if "\u202e" in text:
        text = _RIGHT_TO_LEFT_OVERRIDE.sub(_shown_order, text)
    text = _IGNORABLE.sub("", text)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


_REGEX_SYNTAX = frozenset("\\.^$*+?{}[]()|-#&~ \t\n\r\v\f")


def normalise_pattern(pattern: str) -> str:
    """An author's regular expression made to match normalised text: each non-ASCII literal character
    is replaced by its normalised form, escaped where that form is regex syntax, so a fullwidth "（"
    stays a literal parenthesis and a no-break space a literal space (also in verbose mode). An
    ignorable character becomes an empty group outside a character class (a quantifier after it still
    has something to repeat) and stays as written inside one (where it matches nothing). Escape
    sequences are ASCII and kept as written, so `\\u200b` in a pattern matches nothing in normalised
    text: set `normalize_unicode: false` to look for invisible characters. A multi-character form
    inside a character class (the ligature "ﬁ" in "[ﬁ]") becomes its letters; a combining mark after a
    plain letter is composed with it ("e" + U+0301 → "é", as in normalised text)."""
    if pattern.isascii():
        return pattern
    out: list[str] = []
    backslashes = 0
    in_class = False
    class_start = -1  # index in `out` where the current class's members start (a "]" there is literal)
    for char in pattern:
        escaped = backslashes % 2 == 1
        if char.isascii():
            out.append(char)
            if char == "\\":
                backslashes += 1
                continue
            backslashes = 0
            if escaped:
                continue
            if char == "[" and not in_class:
                in_class, class_start = True, len(out)
            elif char == "^" and in_class and len(out) - 1 == class_start:
                class_start = len(out)
            elif char == "]" and in_class and len(out) - 1 != class_start:
                in_class = False
            continue
        backslashes = 0
        base = ""
        if (unicodedata.combining(char) and not escaped and out and len(out[-1]) == 1 and out[-1].isalnum()
                and out[-1].isascii() and (len(out) < 2 or out[-2] != "\\")):
            base = out.pop()  # "e" + U+0301 is "é" in normalised text: normalise the pair
        form = normalise_unicode(base + char)
        if form == "":
            if in_class:
                out.append(char)
                continue
            form_text = "(?:)"
        else:
            form_text = "".join("\\" + c if c in _REGEX_SYNTAX else c for c in form)
        if escaped:
            out.pop()  # the backslash made a non-ASCII literal; the escaped form keeps it literal
        out.append(form_text)
    return "".join(out)
