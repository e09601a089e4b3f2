"""Every misuse in the error table (tests/core/misuse_support.py) and the error a user sees for it.

Prints one row per case (what, on what, the exception, how many of gymenvs' own frames its traceback
shows, the message), then the number of cases, the longest message and the most library frames.
Builds one env of each registered id (MiniWoB starts a browser) and one vector env per backend
(Ray starts a local Ray). Run from the repository root:

    python examples/benchmarks/misuse_errors.py [--backends thread process ray]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "core"))

from misuse_support import (  # noqa: E402
    BACKENDS,
    REFUSED_VALUES,
    Case,
    construction_cases,
    env_cases,
    library_frames,
    problems,
    raised,
    refused_value_case,
    replay_cases,
    vector_cases,
)

import gymenvs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    rows: list[tuple[Case, BaseException]] = [(case, raised(case, None)) for case in construction_cases()]
    for env_id in gymenvs.list_envs():
        env = gym.make(env_id)
        try:
            rows += [(case, raised(case, env)) for case in env_cases(env_id)]
        finally:
            env.close()
    if "ray" in args.backends:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    for backend in args.backends:
        with gym.make_vec("gymenvs/Echo-v0", num_envs=2, backend=backend) as envs:
            envs.reset(seed=0)
            rows += [(case, raised(case, envs)) for case in vector_cases(backend)]
        for env_id in REFUSED_VALUES:
            with gym.make_vec(env_id, num_envs=2, backend=backend) as envs:
                case = refused_value_case(env_id, backend)
                rows.append((case, raised(case, envs)))
    with tempfile.TemporaryDirectory() as folder:
        rows += [(case, raised(case, Path(folder))) for case in replay_cases()]
    report(rows)


def report(rows: list[tuple[Case, BaseException]]) -> None:
    for case, exc in rows:
        wrong = problems(case, exc)
        flag = "" if not wrong else f"   <-- {'; '.join(wrong)}"
        print(f"{case.id:<58} {type(exc).__name__:<18} {len(library_frames(exc))} frames  {exc}{flag}")
    case, exc = max(rows, key=lambda row: len(str(row[1])))
    print(f"\ncases: {len(rows)}; as expected: {sum(not problems(case, exc) for case, exc in rows)}")
    print(f"longest message ({len(str(exc))} characters, one line, {case.id}):\n  {exc}")
    print(f"most library frames in a traceback: {max(len(library_frames(exc)) for _, exc in rows)}")


if __name__ == "__main__":
    main()
