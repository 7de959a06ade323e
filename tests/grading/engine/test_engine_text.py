"""grading.engine.text: what an agent wrote, made storable (PostgreSQL, UTF-8, JSON APIs) and still readable."""

from __future__ import annotations

import base64
import os

from grading.engine.text import storable, storable_name, storable_text


def test_storable_text_escapes_nuls_and_surrogates_and_keeps_the_rest():
    assert storable_text("plain \\u0000 text é😀") == "plain \\u0000 text é😀"
    assert storable_text("a\x00b\ud800c\udcffd") == "a\\u0000b\\ud800c\\udcffd"
    assert storable_text("a\x00b\ud800").encode("utf-8")  # encodable now


def test_storable_walks_keys_and_values_at_any_depth_and_leaves_clean_values_alone():
    clean = {"a": [1, "b", {"c": None}]}
    assert storable(clean) is clean
    deep = current = []
    for _ in range(5000):
        current.append([])
        current = current[0]
    current.append("\x00")
    out = storable({"k\ud800": [("t\x00",), deep]})
    assert list(out) == ["k\\ud800"] and out["k\\ud800"][0] == ["t\\u0000"]
    leaf = out["k\\ud800"][1]
    for _ in range(5000):
        leaf = leaf[0]
    assert leaf == ["\\u0000"]


def test_a_name_that_is_not_utf8_is_readable_and_its_bytes_are_kept():
    name = os.fsdecode(b"dir\xfe/a\xffb")
    readable, raw = storable_name(name)
    assert readable == "dir\\xfe/a\\xffb" and base64.b64decode(raw) == b"dir\xfe/a\xffb"
    assert storable_name("ok/é\\xff.txt") == ("ok/é\\xff.txt", None)  # a real backslash: no raw form, so told apart
    assert storable_name("x\ud800") == ("x\\ud800", None)  # no bytes behind it
