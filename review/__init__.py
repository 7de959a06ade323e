"""Review decides: submit a task version, the review queue, reviews and per-check comments,
sanity gates, judge agreement (web + API). Imports authoring, grading and sandbox, never the reverse."""
