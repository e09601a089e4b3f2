"""The driver of the Ray cluster test (tests/vector/test_ray_cluster.py), run as a process of its own so that its Ray
connection never mixes with the test session's local Ray.

It plays an 8-episode SWE-v0 rollout (`make_rollout_func`, the tiny model) on the cluster at ADDRESS, each slot
reserving one `docker` resource, pulling images from REGISTRY. At the first generation, when every episode has its
container, it loses the second node (SIGKILL of its `ray start` NODE2_PID, its raylet and workers: no cleanup). It
writes to OUTPUT what it saw: the episodes' outcomes, the rollout's counts, and at every generation the containers of
each engine (episode id -> owner pid)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from cluster_support import kill_tree

ENV_ID = "gymenvs/SWE-v0"
EPISODES = 8


def containers(engine: str | None, session: int | None = None) -> dict[str, str]:
    """{episode id: owner pid} of the gymenvs containers on `engine` (None: the first engine), only those whose owner
    runs in `session` if given (the head node's processes: other tests share the first engine)."""
    import docker

    from gymenvs.container.runtime.owners import LABEL, LABEL_EPISODE, LABEL_PID

    client = docker.DockerClient(base_url=engine) if engine else docker.from_env()
    try:
        # sparse: no inspection of each, which fails for a container another test removes meanwhile
        listed = client.containers.list(all=True, sparse=True, filters={"label": LABEL})
        found = {(c.attrs.get("Labels") or {}).get(LABEL_EPISODE) or c.id: (c.attrs.get("Labels") or {}).get(LABEL_PID, "")
                 for c in listed}
    finally:
        client.close()
    return {episode: pid for episode, pid in found.items() if session is None or _session_of(pid) == session}


def _session_of(pid: str) -> int | None:
    try:
        return os.getsid(int(pid))
    except (ValueError, ProcessLookupError):
        return None


class LosingGenerator:
    """The tiny model's generator that, at each call, notes each engine's containers, and at the first loses node 2."""

    def __init__(self, inner, head_session: int, node2_pid: int, node2_engine: str):
        self.inner, self.head_session = inner, head_session
        self.node2_pid, self.node2_engine = node2_pid, node2_engine
        self.seen: list[dict[str, dict[str, str]]] = []
        self.lost_at = 0.0

    def generate(self, prompts, max_tokens):
        self.seen.append({"engine1": containers(None, self.head_session), "engine2": containers(self.node2_engine)})
        if len(self.seen) == 1:
            kill_tree(self.node2_pid)
            self.lost_at = time.monotonic()
            logging.getLogger("wrappers").info("node 2 lost: its ray start, raylet and workers SIGKILLed")
        return self.inner.generate(prompts, max_tokens)


def main(address: str, registry: str, head_session: int, node2_pid: int, node2_engine: str, output: str) -> None:
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    logging.basicConfig(format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("wrappers").setLevel(logging.INFO)  # the actors replaced, the episodes replayed
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    generator = LosingGenerator(TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling()),
                                head_session, node2_pid, node2_engine)
    rollout = make_rollout_func(
        ENV_ID, env_kwargs={"registry": registry, "max_turns": 2, "command_timeout_s": 10.0}, max_tokens_per_turn=8,
        backend="ray", vector_kwargs={"address": address, "resources": {"docker": 1},
                                      # Ray's default packs the driver's node first while it has room
                                      "actor_options": {"scheduling_strategy": "SPREAD"}},
    )
    started = time.monotonic()
    try:
        episodes = rollout.run(["Fix the issue."] * EPISODES, generator, tokenizer, seeds=list(range(EPISODES)),
                               max_completion_length=64)
    finally:
        rollout.close()
    report = {
        "seconds": round(time.monotonic() - started, 1),
        "lost_after": round(generator.lost_at - started, 1),
        "episodes": [{"outcome": e.outcome, "trainable": e.trainable, "retries": e.retries, "reward": e.reward,
                      "infra_failures": e.infra_failures}
                     for e in episodes],
        "counts": rollout.outcome_counts,
        "seen": generator.seen,
        "after_close": {"engine1": containers(None), "engine2": containers(node2_engine)},
    }
    with open(output, "w") as out:
        json.dump(report, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
