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
of the line) are reversed, into the order a reader sees them: "\\u202ellik" shows as "kill" (other bidi
controls only move whole runs and are removed).

Removing first lets NFKC compose what an invisible character had split ("e", U+200D, U+0301 → "é"),
and NFKC never produces an ignorable character, so the result is stable: normalising it again
changes nothing (tests/grading/engine/test_text_judge_abuse.py proves both over every code point).

Letters of other scripts drawn like Latin ones (Cyrillic "а", Greek "ο") are different letters, so
normalised text keeps them: "Pаris" with a Cyrillic "а" does not equal "Paris", and a lookalike
spelling never fakes an expected answer. Where a match LOWERS the reward (a penalty's phrase, a
`not_contains`, a pattern that must not match), the checks also read the text with a bounded table
of such letters folded to Latin (`fold_lookalikes`), so "kіll" with a Cyrillic "і" is still caught.

Pure ASCII text is returned as it is, without work (the common case, and the pack's reward
function is measured for throughput). Callers cache per text per grade (`GradingContext`).

The other rule kept here (`storable_text`, `storable`, `storable_name`, at the end): text an agent produced,
made storable, what PostgreSQL, UTF-8 and a JSON API refuse escaped readably.

An agent controls its answer, its turns, its tool output and the names of its files, and may put in them what
is not Unicode text: a file named with invalid UTF-8 (`b'a\\xffb'`) reaches Python as a lone surrogate
(`'a\\udcffb'`, the file system's surrogateescape), JSON may carry a lone `\\ud800`, and any of them a NUL.
PostgreSQL's jsonb refuses `\\u0000` and a lone surrogate escape, a text column a NUL, and UTF-8 (the database,
a page, an HTTP request to the model or the judge) a lone surrogate. Any of them would turn a rollout into an
error with its grade lost, which an agent could do to every low-scoring rollout.

So what the sandbox and the policy return is made storable where it enters: a lone surrogate becomes the six
characters `\\udcff`, a NUL the six characters `\\u0000` (both readable, and what JSON would have written), and a
file name the bytes it stands for, invalid ones escaped as `\\xff`, with the raw bytes kept (`storable_name`).
Text that holds neither is returned as it is.
"""

from __future__ import annotations

import base64
import json
import os
import re
import unicodedata
from typing import Any

# Unicode 16's Cf characters and the other Default_Ignorable_Code_Points (DerivedCoreProperties.txt),
# as ranges. A test checks that every Cf character of the running Python is here.
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),  # soft hyphen (Cf)
    (0x034F, 0x034F),  # combining grapheme joiner (Mn, default-ignorable)
    (0x0600, 0x0605),  # Arabic number signs (Cf)
    (0x061C, 0x061C),  # Arabic letter mark (Cf)
    (0x06DD, 0x06DD),  # Arabic end of ayah (Cf)
    (0x070F, 0x070F),  # Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),  # Arabic pound and piastre marks above (Cf)
    (0x08E2, 0x08E2),  # Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers (default-ignorable)
    (0x17B4, 0x17B5),  # Khmer inherent vowels (default-ignorable)
    (0x180B, 0x180F),  # Mongolian free variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, ZWNJ, ZWJ, LRM, RLM (Cf)
    (0x202A, 0x202E),  # bidi embeddings and overrides (Cf)
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated format chars
    (0x3164, 0x3164),  # Hangul filler (default-ignorable)
    (0xFE00, 0xFE0F),  # variation selectors 1-16 (default-ignorable)
    (0xFEFF, 0xFEFF),  # zero-width no-break space / BOM (Cf)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler (default-ignorable)
    (0xFFF0, 0xFFFB),  # reserved default-ignorables and interlinear annotation characters (Cf)
    (0x110BD, 0x110BD),  # Kaithi number sign (Cf)
    (0x110CD, 0x110CD),  # Kaithi number sign above (Cf)
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls (Cf)
    (0x1BCA0, 0x1BCA3),  # shorthand format controls (Cf)
    (0x1D173, 0x1D17A),  # musical symbol beam and phrase controls (Cf)
    (0xE0000, 0xE0FFF),  # tag characters and variation selectors 17-256 (Cf, default-ignorable)
)


def _char_class(ranges) -> str:
    return "".join(re.escape(chr(low)) + ("-" + re.escape(chr(high)) if high != low else "") for low, high in ranges)


# One scan finds the BMP ignorables and every astral character: `re` matches a BMP class by bitmap, but
# tries astral ranges one by one at every position (three times slower over the whole class).
_IGNORABLE_ASTRAL = tuple((low, high) for low, high in _IGNORABLE_RANGES if high > 0xFFFF)
_IGNORABLE_OR_ASTRAL = re.compile(
    "[" + _char_class(range_ for range_ in _IGNORABLE_RANGES if range_[1] <= 0xFFFF) + "]|[\U00010000-\U0010ffff]"
)


def is_ignorable(char: str) -> bool:
    """True for a character `normalise_unicode` removes (a format or other default-ignorable character)."""
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


def _without_ignorable(found: re.Match) -> str:
    char = found.group()
    if char <= "\uffff":
        return ""
    code = ord(char)
    return "" if any(low <= code <= high for low, high in _IGNORABLE_ASTRAL) else char


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
    text = _IGNORABLE_OR_ASTRAL.sub(_without_ignorable, text)
    return unicodedata.normalize("NFKC", text)  # cheaper than asking is_normalized first


# Letters of other scripts drawn like a Latin letter in common fonts, and the Latin letter a reader takes
# them for: Cyrillic, Greek, Armenian and a few Latin variants (IPA, dotless). Bounded on purpose: only
# letters a reader cannot tell from the Latin one, so folding them only ever makes a lookalike spelling
# of a phrase read as that phrase. Used only where a match lowers the reward (`fold_lookalikes`).
LOOKALIKES = {
    # Cyrillic
    "\u0430": "a",
    "\u0410": "A",
    "\u0412": "B",
    "\u0441": "c",
    "\u0421": "C",
    "\u0501": "d",
    "\u0435": "e",
    "\u0415": "E",
    "\u04bb": "h",
    "\u041d": "H",
    "\u0456": "i",
    "\u0406": "I",
    "\u04c0": "I",
    "\u0458": "j",
    "\u0408": "J",
    "\u043a": "k",
    "\u041a": "K",
    "\u04cf": "l",
    "\u041c": "M",
    "\u043e": "o",
    "\u041e": "O",
    "\u0440": "p",
    "\u0420": "P",
    "\u051b": "q",
    "\u051a": "Q",
    "\u0455": "s",
    "\u0405": "S",
    "\u0422": "T",
    "\u051d": "w",
    "\u051c": "W",
    "\u0445": "x",
    "\u0425": "X",
    "\u0443": "y",
    "\u0423": "Y",
    "\u04af": "y",
    "\u04ae": "Y",
    # Greek
    "\u03b1": "a",
    "\u0391": "A",
    "\u0392": "B",
    "\u0395": "E",
    "\u0397": "H",
    "\u03b9": "i",
    "\u0399": "I",
    "\u03f3": "j",
    "\u037f": "J",
    "\u03ba": "k",
    "\u039a": "K",
    "\u039c": "M",
    "\u039d": "N",
    "\u03bf": "o",
    "\u039f": "O",
    "\u03c1": "p",
    "\u03a1": "P",
    "\u03a4": "T",
    "\u03c5": "u",
    "\u03bd": "v",
    "\u03c7": "x",
    "\u03a7": "X",
    "\u03a5": "Y",
    "\u0396": "Z",
    # Armenian
    "\u0570": "h",
    "\u0578": "n",
    "\u0585": "o",
    "\u0555": "O",
    "\u0566": "q",
    "\u057d": "u",
    # Latin variants
    "\u0131": "i",
    "\u0237": "j",
    "\u0251": "a",
    "\u0261": "g",
    "\u0269": "i",
    "\u01c0": "l",
}
_LOOKALIKE = re.compile("[" + "".join(LOOKALIKES) + "]")  # a BMP class: one bitmap scan (str.translate is slower)


def _latin(found: re.Match) -> str:
    return LOOKALIKES[found.group()]


def fold_lookalikes(text: str) -> str:
    """Normalised `text` with the `LOOKALIKES` letters read as the Latin letters they are drawn like.

    Applied only where a match lowers the reward (a penalty's phrase, a `not_contains`, a pattern that
    must not match): "kіll" with a Cyrillic "і" is then caught as "kill". Never where a match raises it,
    so a lookalike spelling never fakes an expected answer ("Pаris" ≠ "Paris")."""
    return text if text.isascii() else _LOOKALIKE.sub(_latin, text)


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
        if (
            unicodedata.combining(char)
            and not escaped
            and out
            and len(out[-1]) == 1
            and out[-1].isalnum()
            and out[-1].isascii()
            and (len(out) < 2 or out[-2] != "\\")
        ):
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


# -- storable text: what an agent wrote, as the database, UTF-8 and a JSON API take it ---------------------------
#: Any surrogate code point: in a Python str it is never part of Unicode text (a pair is one code point).
SURROGATE = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def storable_text(text: str) -> str:
    """`text` with each NUL and surrogate written as its `\\uXXXX` escape (six characters); `text` itself when
    it holds neither."""
    if "\x00" not in text and not SURROGATE.search(text):
        return text
    return _UNSTORABLE.sub(_escape, text)


def json_text_storable(text: str) -> bool:
    """Whether JSON text written by `json.dumps(..., ensure_ascii=False)` holds neither a NUL (written `\\u0000`)
    nor a surrogate (kept as it is). False may be a false alarm (a backslash before "u0000" in a string)."""
    return "\\u0000" not in text and not SURROGATE.search(text)


def storable(value: Any) -> Any:
    """A JSON value (dicts, lists, strings, numbers) with every string and key made `storable_text`; `value`
    itself when nothing in it needs it (found by the C encoder, not a walk). Iterative: any depth."""
    try:
        if json_text_storable(json.dumps(value, ensure_ascii=False, check_circular=False)):
            return value
    except (TypeError, ValueError, RecursionError):  # not plain JSON: walk what is
        pass
    root: list = [value]
    stack: list = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, str):
            parent[key] = storable_text(item)
        elif isinstance(item, dict):
            copy = {storable_text(k) if isinstance(k, str) else k: v for k, v in item.items()}
            parent[key] = copy
            stack += [(copy, k, v) for k, v in copy.items()]
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            parent[key] = copy
            stack += [(copy, index, child) for index, child in enumerate(copy)]
    return root[0]


def storable_name(name: str) -> tuple[str, str | None]:
    """(readable, raw) for a file name the sandbox produced: readable is the name's bytes decoded as UTF-8 with
    each invalid byte written `\\xff` (and any other surrogate or NUL escaped by `storable_text`); raw is the
    name's bytes in base64 when readable is not the name itself (None otherwise), so the name is recoverable."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a surrogate the file system's surrogateescape did not make: no bytes stand behind it
        return storable_text(name), None
    readable = storable_text(raw.decode("utf-8", "backslashreplace"))
    if readable == name:
        return name, None
    return readable, base64.b64encode(raw).decode("ascii")
