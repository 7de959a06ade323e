"""Sandbox backends: one small interface (`base.Backend`, `base.Sandbox`), two engines."""

from __future__ import annotations

from .base import Backend, Sandbox


def get_backend(name: str, **options) -> Backend:
    """Return a backend by name: "bubblewrap" (embedded default) or "docker".

    Options are passed to the backend's constructor (see each backend).
    """
    if name in ("bubblewrap", "bwrap"):
        from .bubblewrap import BubblewrapBackend

        return BubblewrapBackend(**options)
    if name == "docker":
        from .docker import DockerBackend

        return DockerBackend(**options)
    raise ValueError(f"unknown sandbox backend {name!r} (expected 'bubblewrap' or 'docker')")


__all__ = ["Backend", "Sandbox", "get_backend"]
