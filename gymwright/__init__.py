"""Gymwright: a workshop for building RL environments for LLM agents."""

from .celery import app as celery_app

__all__ = ["celery_app"]
__version__ = "0.1.0"
