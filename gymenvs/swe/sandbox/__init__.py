"""Where an episode's commands run: the `Sandbox` protocol (`base`) and its Docker backend (`docker`).

One job per module: `base` (the protocol, `Limits`, the errors, `parse_size`), `docker` (the Docker
backend: containers, ownership labels, orphan reaping), `shell` (the persistent shell), `pool` (warm
containers), `images` (image names and offline builds), `output` (capping and decoding). A new
backend is one new module beside `docker`.
"""

from gymenvs.swe.sandbox.base import (
    SIZE_PATTERN,
    TIMEOUT_EXIT_CODES,
    ContainerGone,
    ContainerPaused,
    DiskLimitExceeded,
    ExecProcess,
    ExecResult,
    ImageMissing,
    Limits,
    OutOfMemory,
    Sandbox,
    SandboxError,
    parse_size,
)
from gymenvs.swe.sandbox.docker import (
    DISK_CHECK_INTERVAL,
    KEPT_CAPABILITIES,
    LABEL,
    LABEL_EPISODE,
    LABEL_HOST,
    LABEL_PID,
    LABEL_ROLE,
    LABEL_START,
    SECURITY_OPTIONS,
    DockerSandbox,
    ExecStream,
    describe_stopped,
    docker_client,
    install_sigterm_cleanup,
    owner_alive,
    owner_labels,
    process_start_time,
    reap_orphans,
    reap_orphans_once,
    remove_own_containers,
    shared_client,
    tar_archive,
)
from gymenvs.swe.sandbox.output import OutputCapture, decode_output
from gymenvs.swe.sandbox.pool import PrivateDirectory, Warm, WarmPool, discard, start_container
from gymenvs.swe.sandbox.shell import PersistentShell, ShellResult

__all__ = [
    "DISK_CHECK_INTERVAL", "KEPT_CAPABILITIES", "LABEL", "LABEL_EPISODE", "LABEL_HOST", "LABEL_PID", "LABEL_ROLE",
    "ContainerPaused", "ImageMissing", "OutOfMemory",
    "LABEL_START", "SECURITY_OPTIONS", "SIZE_PATTERN", "TIMEOUT_EXIT_CODES", "ContainerGone", "DiskLimitExceeded",
    "DockerSandbox", "ExecProcess", "ExecResult", "ExecStream", "Limits", "OutputCapture", "PersistentShell",
    "PrivateDirectory", "Sandbox", "SandboxError", "ShellResult", "Warm", "WarmPool", "decode_output",
    "describe_stopped", "discard", "docker_client", "install_sigterm_cleanup", "owner_alive", "owner_labels",
    "parse_size", "process_start_time", "reap_orphans", "reap_orphans_once", "remove_own_containers", "shared_client",
    "start_container", "tar_archive",
]
