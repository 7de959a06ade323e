"""Whether the operator lets sandboxes reach the network. Authoring asks when an
environment is saved, sandbox when a preview starts; the sandbox runtime refuses
on its own too (a backend without an egress policy or network never gives one)."""

from __future__ import annotations

from django.conf import settings

NETWORK_ON = ("allowed", "egress")


def egress_refusal(backend: str | None = None) -> str | None:
    """None when an environment with network egress may run (on `backend`, or on
    some backend when None); otherwise why not, naming the operator's setting."""
    if not settings.SANDBOX_EGRESS:
        return "network egress is off on this server; an operator enables it with GYMWRIGHT_SANDBOX_EGRESS"
    if backend == "docker" and not settings.SANDBOX_DOCKER_NETWORK:
        return (
            "network egress on the docker backend needs an operator-named docker network "
            "(GYMWRIGHT_SANDBOX_DOCKER_NETWORK)"
        )
    return None
