"""One Harbor task: its folder, its `task.toml` (a validated model of the documented schema 1.x) and its parts.

A task is a folder with `instruction.md`, `task.toml`, `environment/` (a Dockerfile or a
docker-compose file), `tests/test.sh` (the verifier, which writes `/logs/verifier/reward.txt` or
`reward.json`) and optionally `solution/solve.sh` (the oracle). The `harbor` package needs
Python >= 3.12, so its own models are not used here; `TaskConfig` mirrors the documented fields
under Harbor's names. The old spellings (`version`, `memory`, `storage`, `allow_internet`) are read
as the new ones. Keys this model does not know are ignored, as Harbor ignores them, and listed in
`TaskConfig.unknown_keys`; a schema version other than 1.x is a `ValueError`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError, model_validator

SUPPORTED_MAJOR = 1
INSTRUCTION = "instruction.md"
CONFIG = "task.toml"
ENVIRONMENT = "environment"
TESTS = "tests"
SOLUTION = "solution"
TEST_SCRIPT = "test.sh"
SOLVE_SCRIPT = "solve.sh"
DOCKERFILE = "Dockerfile"
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")

NetworkMode = Literal["public", "no-network", "allowlist"]
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_MB_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}  # a bare number is MB


def size_mb(value: Any, field: str) -> int:
    """A size in MB from an int (MB) or a string with a unit ("2G", "512M", "1024"); ValueError naming `field`."""
    if isinstance(value, bool):
        raise ValueError(f"{field}={value!r}: allowed is a number of MB or a size such as '2G'")
    if isinstance(value, int | float):
        return int(value)
    match = _SIZE.match(str(value))
    if match is None:
        raise ValueError(f"{field}={value!r}: allowed is a number of MB or a size such as '2G' or '512M'")
    number, unit = match.groups()
    return max(1, int(float(number) * _MB_PER_UNIT[unit.lower() or "m"]))


class _Section(BaseModel):
    """A table of task.toml: known keys validated, unknown ones kept aside (Harbor ignores them)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(self.model_extra or {})


class TaskInfo(_Section):
    """[task]: who the task is (schema 1.1+)."""

    name: str | None = None
    description: str | None = None
    authors: list[dict[str, str]] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class VerifierSection(_Section):
    """[verifier]: how `tests/test.sh` runs after the episode."""

    timeout_sec: PositiveFloat = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    network_mode: NetworkMode | None = None


class AgentSection(_Section):
    """[agent]: the agent's time and network."""

    timeout_sec: PositiveFloat = 600.0
    user: str | None = None
    network_mode: NetworkMode | None = None


class EnvironmentSection(_Section):
    """[environment]: the container the agent works in."""

    build_timeout_sec: PositiveFloat = 600.0
    docker_image: str | None = None
    cpus: PositiveFloat = 1.0
    memory_mb: PositiveInt = 2048
    storage_mb: PositiveInt = 10240
    gpus: NonNegativeInt = 0
    network_mode: NetworkMode = "public"
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old in data:
                value = data.pop(old)
                data.setdefault(new, size_mb(value, f"[environment] {old}"))
        if "allow_internet" in data:
            allowed = data.pop("allow_internet")
            if not isinstance(allowed, bool):
                raise ValueError(f"[environment] allow_internet={allowed!r}: allowed is true or false")
            data.setdefault("network_mode", "public" if allowed else "no-network")
        return data

    @property
    def allow_internet(self) -> bool:
        return self.network_mode == "public"


class SolutionSection(_Section):
    """[solution]: the oracle's environment variables."""

    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Section):
    """One task.toml. `schema_version` (or its old name `version`) must be 1.x."""

    schema_version: str = "1.0"
    task: TaskInfo = Field(default_factory=TaskInfo)
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _version(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "version" in data:
            old = data.pop("version")
            data.setdefault("schema_version", old)
        version = str(data.get("schema_version", "1.0"))
        major = version.split(".", 1)[0]
        if major != str(SUPPORTED_MAJOR):
            raise ValueError(f"schema_version={version!r}: gymenvs reads Harbor task.toml schema {SUPPORTED_MAJOR}.x only")
        data["schema_version"] = version
        return data

    @property
    def unknown_keys(self) -> list[str]:
        """Every key this model does not know, dotted ("environment.tpu", "steps")."""
        keys = list(super().unknown_keys)
        for name in ("task", "verifier", "agent", "environment", "solution"):
            keys += [f"{name}.{key}" for key in getattr(self, name).unknown_keys]
        return keys

    @property
    def agent_network_mode(self) -> NetworkMode:
        """The network of the agent's container: [agent] network_mode, else [environment]'s."""
        return self.agent.network_mode or self.environment.network_mode

    @classmethod
    def from_toml(cls, text: str, where: str = CONFIG) -> TaskConfig:
        """Parse and validate task.toml text; ValueError naming `where` and the bad key."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{where}: not valid TOML: {exc}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{where}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"])
        value = f" (got {error['input']!r})" if "input" in error and not isinstance(error["input"], dict) else ""
        parts.append(f"{location + ': ' if location else ''}{error['msg']}{value}")
    return "; ".join(parts)


EnvironmentKind = Literal["dockerfile", "compose", "image"]


class TerminalTask(BaseModel):
    """One Harbor task, read from its folder (`TerminalTask.from_dir`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The task's name: [task] name, else the folder's name."""
    path: Path
    """The task folder."""
    instruction: str
    """instruction.md: what the policy or agent is told."""
    config: TaskConfig
    environment_kind: EnvironmentKind
    """How its container is made: environment/Dockerfile, a docker-compose file, or [environment] docker_image."""
    tests_dir: Path
    """tests/ (with test.sh); never visible to the agent."""
    solution_dir: Path | None = None
    """solution/ (with solve.sh), the oracle; None if the task has none."""

    @property
    def instance_id(self) -> str:
        """The task's name, under the key the SWE envs pick tasks by (`reset(options={"instance_id": ...})`)."""
        return self.name

    @property
    def environment_dir(self) -> Path:
        return self.path / ENVIRONMENT

    @property
    def test_script(self) -> Path:
        return self.tests_dir / TEST_SCRIPT

    @property
    def solve_script(self) -> Path | None:
        return None if self.solution_dir is None else self.solution_dir / SOLVE_SCRIPT

    @property
    def compose_file(self) -> Path | None:
        return next((self.environment_dir / f for f in COMPOSE_FILES if (self.environment_dir / f).is_file()), None)

    @classmethod
    def from_dir(cls, path: str | Path) -> TerminalTask:
        """Read a task folder; ValueError naming the folder and what is missing or malformed."""
        folder = Path(path)
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a task folder (no such directory)")
        missing = [part for part in (INSTRUCTION, CONFIG, f"{TESTS}/{TEST_SCRIPT}") if not (folder / part).is_file()]
        if missing:
            raise ValueError(f"{folder}: not a Harbor task: missing {missing} (a task needs {INSTRUCTION}, {CONFIG}, "
                             f"{ENVIRONMENT}/ and {TESTS}/{TEST_SCRIPT})")
        config = TaskConfig.from_toml((folder / CONFIG).read_text(encoding="utf-8"), where=str(folder / CONFIG))
        solution = folder / SOLUTION
        return cls(
            name=config.task.name or folder.name,
            path=folder,
            instruction=(folder / INSTRUCTION).read_text(encoding="utf-8"),
            config=config,
            environment_kind=_environment_kind(folder, config),
            tests_dir=folder / TESTS,
            solution_dir=solution if (solution / SOLVE_SCRIPT).is_file() else None,
        )


def _environment_kind(folder: Path, config: TaskConfig) -> EnvironmentKind:
    environment = folder / ENVIRONMENT
    # A compose file beside a Dockerfile is merged over the main service built from it (as Harbor does): running
    # the Dockerfile alone would leave out the compose file's other services.
    if any((environment / name).is_file() for name in COMPOSE_FILES):
        return "compose"
    if (environment / DOCKERFILE).is_file():
        return "dockerfile"
    if config.environment.docker_image:
        return "image"
    raise ValueError(f"{folder}: {ENVIRONMENT}/ has no {DOCKERFILE} or docker-compose file and task.toml sets no "
                     "[environment] docker_image: there is nothing to run the task in")
