"""SWE task images: their names (a row's own `image`, else a template, else the SWE-Gym or SWE-bench
convention) and the fixture tasks' images, built offline on the base image (`gymenvs.container.images`).
"""

from __future__ import annotations

from collections.abc import Iterable
from string import Formatter

from gymenvs.container.images import BASE_IMAGE
from gymenvs.container.runtime import ImageBuildError, Runtime
from gymenvs.container.runtime.commands import tar_archive
from gymenvs.container.runtime.owners import LABEL
from gymenvs.swe.tasks.tasks import FIXTURES, Task, fixtures_path, load_tasks

WORKDIR = "/testbed"
#: Shell lines that put a command in the task's Python environment: SWE-bench images keep it in
#: the conda env "testbed", which a non-interactive shell does not activate by itself.
ENV_SETUP = f"""if [ -f /opt/miniconda3/bin/activate ]
then . /opt/miniconda3/bin/activate && conda activate testbed
fi >/dev/null 2>&1
cd {WORKDIR}"""
#: The repos of SWE-Gym, whose images follow its own naming (xingyaoww/..._s_...).
SWE_GYM_REPOS = frozenset({
    "getmoto/moto", "python/mypy", "conan-io/conan", "modin-project/modin", "Project-MONAI/MONAI", "iterative/dvc",
    "dask/dask", "bokeh/bokeh", "pydantic/pydantic", "pandas-dev/pandas", "facebookresearch/hydra",
})
SWE_BENCH_TEMPLATE = "swebench/sweb.eval.x86_64.{swebench_id}:latest"
SWE_GYM_TEMPLATE = "xingyaoww/sweb.eval.x86_64.{swegym_id}:latest"
TEMPLATE_FIELDS = ("instance_id", "swebench_id", "swegym_id", "repo", "version")
_FIXTURE_AUTHOR = {
    "GIT_AUTHOR_NAME": "gymenvs fixtures", "GIT_AUTHOR_EMAIL": "fixtures@gymenvs.invalid",
    "GIT_COMMITTER_NAME": "gymenvs fixtures", "GIT_COMMITTER_EMAIL": "fixtures@gymenvs.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}


def check_template(template: str) -> str:
    """`template` if it only uses the known fields; `ValueError` naming the others."""
    used = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    unknown = used - set(TEMPLATE_FIELDS)
    if unknown or not used:
        raise ValueError(f"image_template={template!r}: use one or more of the fields {{{'}, {'.join(TEMPLATE_FIELDS)}}}")
    return template


def image_for(task: Task, template: str | None = None) -> str:
    """The image a task runs in: its own `image` field, else `template`, else the dataset's convention."""
    if task.image:
        return task.image
    if template is None:
        template = SWE_GYM_TEMPLATE if task.repo in SWE_GYM_REPOS else SWE_BENCH_TEMPLATE
    return template.format(
        instance_id=task.instance_id,
        swebench_id=task.instance_id.replace("__", "_1776_").lower(),
        swegym_id=task.instance_id.replace("__", "_s_").lower(),
        repo=task.repo,
        version=task.version or "",
    )


# -- fixture task images -----------------------------------------------------------------------


def build_fixture_images(runtime: Runtime, tasks: Iterable[Task] | None = None, *, base: str = BASE_IMAGE,
                         force: bool = False, progress: bool = True) -> list[str]:
    """Build the image of each fixture task on top of `base`; return the names built (existing ones are kept)."""
    from tqdm import tqdm

    if not runtime.image_exists(base):
        raise ImageBuildError(f"base image {base!r} is missing: build it first with `gymenvs swe build-base-image`")
    built = []
    for task in tqdm(list(tasks or load_tasks(FIXTURES)), desc="fixture images", unit="image", disable=not progress):
        name = image_for(task)
        if force or not runtime.image_exists(name):
            runtime.build(fixture_context(task, base), name)
            built.append(name)
    return built


def fixture_context(task: Task, base: str) -> bytes:
    """A docker build context: the task's repo under repo/ and a Dockerfile that commits it at /testbed.

    The repo is a directory of fixtures/repos, or for a row with an `upstream` field a release's
    sdist fetched by pip (`gymenvs.swe.tasks.upstream`).
    """
    from gymenvs.swe.tasks import upstream

    spec = task.extra.get("upstream")
    files = upstream.context_files(spec) if spec else _fixture_repo_files(task)
    env = " ".join(f'{key}="{value}"' for key, value in _FIXTURE_AUTHOR.items())
    dockerfile = f"""FROM {base}
{upstream.dockerfile_lines(spec) if spec else ""}COPY repo {WORKDIR}
WORKDIR {WORKDIR}
RUN git init -q && git add -A && {env} git commit -q -m "Initial commit" \\
 && test "$(git rev-parse HEAD)" = "{task.base_commit}" \\
 || {{ echo "the fixture repo does not hash to base_commit {task.base_commit}" >&2; exit 1; }}
{upstream.after_commit_lines() if spec else ""}LABEL {LABEL}.instance="{task.instance_id}"
"""
    return tar_archive({"Dockerfile": dockerfile.encode(), **files})


def _fixture_repo_files(task: Task) -> dict[str, bytes]:
    repo_dir = fixtures_path() / "repos" / task.repo.rsplit("/", 1)[-1]
    if not repo_dir.is_dir():
        raise ImageBuildError(f"fixture task {task.instance_id}: no repo at {repo_dir}")
    files = {}
    for path in sorted(repo_dir.rglob("*")):
        relative = path.relative_to(repo_dir)
        if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
            files[f"repo/{relative.as_posix()}"] = path.read_bytes()
    return files
