"""Sandboxes: the pure runtime (sandbox.runtime) and its Django glue (previews, rollouts)."""
