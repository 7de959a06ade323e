"""gymwright.process_cache.Kept: the one per-process LRU (a version's rubric table, grade facts, blob bytes)."""

from gymwright.process_cache import Kept


def test_it_keeps_the_most_recently_used_within_its_entries():
    kept = Kept(entries=2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # "a" is now the most recent
    kept.put("c", 3)
    assert kept.get("b") is None and kept.get("a") == 1 and kept.get("c") == 3 and len(kept) == 2


def test_it_keeps_within_a_total_size_and_leaves_out_a_value_too_large():
    kept = Kept(max_size=10, max_value=6)
    kept.put("big", b"x" * 7)
    assert "big" not in kept
    kept.put("a", b"x" * 4)
    kept.put("b", b"x" * 4)
    kept.put("a", b"x" * 5)  # replaced: its old size no longer counts
    assert set(kept) == {"a", "b"}
    kept.put("c", b"x" * 2)  # 4 + 5 + 2 > 10: the least recently used goes
    assert set(kept) == {"a", "c"}
    kept.clear()
    kept.put("d", b"x" * 6)
    kept.put("e", b"x" * 4)
    assert set(kept) == {"d", "e"}  # the total was reset by clear()
