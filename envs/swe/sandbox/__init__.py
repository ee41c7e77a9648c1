"""Sandbox backends behind one interface, chosen by name: ``bwrap``, ``docker`` or ``auto``.

``auto`` picks docker when a Docker daemon answers and the default image is built, and bwrap
otherwise (the default on Linux without Docker).
"""

from __future__ import annotations

import logging
from pathlib import Path

from turngym.envs.swe.sandbox.base import (
    PINNED_ENV,
    SCRATCH,
    TOOLS,
    WORKDIR,
    ExecResult,
    PhaseTimeouts,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxSpec,
    SandboxUnavailable,
    configure_concurrency,
)

logger = logging.getLogger(__name__)
BACKENDS = ("bwrap", "docker")


def backend_available(name: str) -> str | None:
    """``None`` if ``name`` can run here, else the reason and how to fix it."""
    try:
        if name == "bwrap":
            from turngym.envs.swe.sandbox import bwrap

            bwrap.check_available()
        elif name == "docker":
            from turngym.envs.swe.sandbox import docker

            docker.check_available()
        else:
            return f"unknown sandbox backend {name!r}; choose from {BACKENDS} or 'auto'"
    except SandboxUnavailable as error:
        return str(error)
    return None


def resolve_backend(name: str, image: str | None = None) -> str:
    """The backend ``name`` stands for; raises :class:`SandboxUnavailable` with install hints."""
    if name != "auto":
        problem = backend_available(name)
        if problem:
            raise SandboxUnavailable(problem)
        return name
    from turngym.envs.swe.sandbox import docker

    if backend_available("docker") is None and docker.image_exists(image or docker.DEFAULT_IMAGE):
        return "docker"
    problem = backend_available("bwrap")
    if problem is None:
        return "bwrap"
    raise SandboxUnavailable(
        "no sandbox backend is available. bwrap: " + problem
        + " docker: " + (backend_available("docker") or "the image is not built")
    )


def make_sandbox(backend: str, spec: SandboxSpec, *, workspace_root: Path | None = None) -> Sandbox:
    """An unstarted sandbox of ``backend`` (``start()`` it, or use it as a context manager)."""
    if backend == "bwrap":
        from turngym.envs.swe.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(spec, root=workspace_root)
    if backend == "docker":
        from turngym.envs.swe.sandbox.docker import DockerSandbox

        return DockerSandbox(spec)
    raise ValueError(f"unknown sandbox backend {backend!r}; choose from {BACKENDS}")


__all__ = [
    "BACKENDS",
    "PINNED_ENV",
    "SCRATCH",
    "TOOLS",
    "WORKDIR",
    "ExecResult",
    "PhaseTimeouts",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxSpec",
    "SandboxUnavailable",
    "backend_available",
    "configure_concurrency",
    "make_sandbox",
    "resolve_backend",
]
