"""A GRPO training run with the SWE env, whose pooled instances TRL never closes, leaves no container behind."""

import gc
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker]

TRAIN_AND_EXIT = textwrap.dedent(
    """
    import os
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
    import warnings; warnings.filterwarnings("ignore")
    import docker
    from trl import GRPOConfig, GRPOTrainer
    from gymenvs.container.runtime.owners import LABEL_PID
    from wrappers.trl import environment_factory, episode_dataset
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        environment_factory=environment_factory("gymenvs/SWE-v0", max_turns=2, command_timeout_s=10.0),
        train_dataset=episode_dataset(2),
        args=GRPOConfig(output_dir={output_dir!r}, bf16=False, use_cpu=True, report_to="none", save_strategy="no",
                        disable_tqdm=True, per_device_train_batch_size=2, num_generations=2, max_completion_length=16,
                        max_steps=1, max_tool_calling_iterations=2),
    )
    trainer.train()
    alive = docker.from_env().containers.list(filters={{"label": f"{{LABEL_PID}}={{os.getpid()}}"}})
    print("containers while the trainer lives:", len(alive), flush=True)
    # exit without closing anything, as a training script does
    """
)


def own_containers(client, pid):
    from gymenvs.container.runtime.owners import LABEL_PID

    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={pid}"})


@pytest.fixture
def client(docker_client, swe_images):
    return docker_client


def test_a_training_run_leaves_no_container_behind(client, tmp_path):
    script = TRAIN_AND_EXIT.format(output_dir=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr[-3000:]
    assert "containers while the trainer lives: 2" in stdout  # one per pooled instance, never closed by TRL
    assert own_containers(client, child.pid) == []


def test_a_collected_instance_removes_its_container(client):
    from wrappers.trl import environment_factory

    Environment = environment_factory("gymenvs/SWE-v0", max_turns=2)
    instance = Environment()
    assert "Resolve this issue" in instance.reset(seed=0)
    assert len(own_containers(client, os.getpid())) == 1
    del instance
    gc.collect()
    assert own_containers(client, os.getpid()) == []
