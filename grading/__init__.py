"""Grading: the pure engine (grading.engine) and its Django glue (models, views, jobs)."""
