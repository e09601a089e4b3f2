"""What a Docker container changed, read from its overlay layer on this host (`gymenvs.container.runtime.docker.layer`):
the same paths and kinds the engine's own diff lists, on an image whose layers delete and replace what the layers
under them hold, plus the files the engine's comparison misses."""

from __future__ import annotations

import io
import os
import socket
import tarfile
import uuid

import pytest

from gymenvs.container.runtime.docker.layer import layer_archive, layer_changes, readable_layers
from gymenvs.container.runtime.docker.sandbox import HOSTS_PATH
from gymenvs.swe.images import WORKDIR

#: What the image's top layer does to the base image, so that the container's changes meet whiteouts and an
#: opaque directory in the layers below it.
IMAGE_LAYER = """
rm /etc/issue
rm -rf /usr/share/zoneinfo/America
rm -rf /usr/share/common-licenses && mkdir /usr/share/common-licenses && echo kept > /usr/share/common-licenses/kept
echo old > /opt/old.txt
"""
#: What the container does: every kind of change, at every depth, over those layers.
CONTAINER_CHANGES = """
echo added > /tmp/added.txt
echo back > /etc/issue
mkdir -p /usr/share/zoneinfo/America/sub && echo deep > /usr/share/zoneinfo/America/sub/file
echo more >> /usr/share/common-licenses/kept
echo again > /usr/share/common-licenses/GPL-3
rm /etc/shells
rm -rf /usr/share/zoneinfo/Asia
rm -rf /usr/share/zoneinfo/Europe && mkdir /usr/share/zoneinfo/Europe && echo x > /usr/share/zoneinfo/Europe/Paris
rm -rf /etc/apt/apt.conf.d && echo file > /etc/apt/apt.conf.d
mkdir -p /srv/new/deeper && ln -s /etc/passwd /srv/new/link && mkfifo /srv/new/fifo
chmod 600 /etc/host.conf
chown 1:1 /etc/motd
rm /opt/old.txt
"""
#: Files the container copies up without changing their size, mode or modification time: in its layer, unseen by
#: the engine's comparison of the two trees.
COPIED_UP = """
python3 -c "open('/etc/profile', 'r+')"
ln /etc/passwd /etc/passwd.hard
size=$(stat -c %s /etc/bash.bashrc); when=$(stat -c %Y /etc/bash.bashrc)
printf 'X' | dd of=/etc/bash.bashrc bs=1 seek=0 conv=notrunc 2>/dev/null; touch -d @$when /etc/bash.bashrc
test "$(stat -c %s /etc/bash.bashrc)" = "$size"
"""


@pytest.fixture(scope="module")
def layered_image(runtime, docker_client, swe_images):
    """The base image with a layer on top that deletes a file and a directory and replaces another directory."""
    box = runtime.start(swe_images, role="test", episode_id="layer-changes", workdir=WORKDIR)
    try:
        result = box.run(IMAGE_LAYER, timeout=30)
        assert result.exit_code == 0, result.output.text()
        image = box.commit("gymenvs/layer-changes-test", uuid.uuid4().hex[:12])
    finally:
        box.remove()
    yield image
    docker_client.images.remove(image, force=True)


@pytest.fixture(scope="module")
def changed(runtime, docker_client, layered_image):
    """(what `changed_paths` lists, what the engine's diff lists, what its layer holds) for one stopped container."""
    box = runtime.start(layered_image, role="test", episode_id="layer-changes", workdir=WORKDIR)
    try:
        result = box.run(CONTAINER_CHANGES + COPIED_UP, timeout=30)
        assert result.exit_code == 0, result.output.text()
        box.stop()
        kinds = {0: "changed", 1: "added", 2: "deleted"}
        engine = {change["Path"]: kinds[change["Kind"]] for change in docker_client.api.diff(box.id)}
        layers = readable_layers(docker_client.api.inspect_container(box.id)["GraphDriver"])
        yield box.changed_paths("/"), engine, layers
    finally:
        box.remove()


def test_the_layer_is_read_on_this_host(runtime, changed):
    _, _, layers = changed
    assert runtime.overlay_layers and layers is not None  # what this machine's engine and CI run


def test_the_layer_lists_what_the_engines_diff_lists(changed):
    listed, engine, _ = changed
    copied_up = {"/etc/profile", "/etc/passwd", "/etc/bash.bashrc"}
    assert engine.pop(HOSTS_PATH) == "changed"  # written by the sandbox where the engine would mount its own: left out
    assert {path: kind for path, kind in listed.items() if path not in copied_up} == engine
    assert engine["/etc/issue"] == "added"  # deleted in the layer below, so new again
    assert engine["/usr/share/common-licenses/GPL-3"] == "added"  # hidden by the opaque directory below
    assert engine["/usr/share/zoneinfo/Europe/Berlin"] == "deleted"  # its directory replaced by the container
    assert engine["/usr/share/zoneinfo/America/sub/file"] == "added" and engine["/usr/share/zoneinfo/Asia"] == "deleted"
    assert engine["/etc/apt/apt.conf.d"] == "changed" and engine["/srv/new/fifo"] == "added"


def test_the_layer_lists_files_copied_up_unchanged_in_size_and_time_which_the_engine_misses(changed):
    listed, engine, _ = changed
    for path in ("/etc/profile", "/etc/passwd", "/etc/bash.bashrc"):
        assert listed[path] == "changed" and path not in engine, path
    assert listed["/etc/passwd.hard"] == "added"


def test_no_layer_is_read_where_it_is_not_an_overlay_on_this_host(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    upper.mkdir()
    lower.mkdir()
    data = {"UpperDir": str(upper), "LowerDir": str(lower)}
    assert readable_layers({"Name": "overlay2", "Data": data}) == (str(upper), [str(lower)])
    assert readable_layers({"Name": "overlay", "Data": data}) is None  # Podman's: its own diff is cheap
    assert readable_layers({"Name": "vfs", "Data": None}) is None
    missing = {"UpperDir": "/var/lib/docker/overlay2/" + "0" * 64 + "/diff", "LowerDir": str(lower)}
    assert readable_layers({"Name": "overlay2", "Data": missing}) is None  # another host's engine


def test_an_added_directory_lists_everything_under_it_as_added(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    (upper / "new" / "deeper").mkdir(parents=True)
    (upper / "new" / "deeper" / "file").write_text("x")
    (lower / "old").mkdir(parents=True)
    assert layer_changes(str(upper), [str(lower)]) == {"/new": "added", "/new/deeper": "added", "/new/deeper/file": "added"}


def test_a_layer_nested_deeper_than_pythons_recursion_limit_is_read(tmp_path):
    """An agent cannot make grading fail by nesting directories: the walk keeps its own stack."""
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    lower.mkdir()
    nested = [str(upper)]
    for _ in range(1100):  # deeper than sys.getrecursionlimit() (1000)
        nested.append(nested[-1] + "/d")
        os.makedirs(nested[-1])
    with open(nested[-1] + "/file", "w") as file:
        file.write("x")
    try:
        changes = layer_changes(str(upper), [str(lower)])
    finally:  # from the bottom up: Python 3.11's shutil.rmtree, which cleans tmp_path, recurses
        os.remove(nested[-1] + "/file")
        for directory in reversed(nested):
            os.rmdir(directory)
    assert len(changes) == 1101 and changes["/d" * 1100 + "/file"] == "added"


def test_the_layers_entries_are_archived_each_alone_with_kind_owner_mode_and_links(tmp_path):
    """What Harbor grading copies into a verifier started ahead: each listed entry as the layer holds it (a folder
    without what the list does not name), a second name of a file as a hard link, a socket left out."""
    upper = tmp_path / "upper"
    (upper / "app" / "unlisted").mkdir(parents=True)
    (upper / "app" / "private").write_text("secret")
    os.chown(upper / "app" / "private", 65534, 65534)
    os.chmod(upper / "app" / "private", 0o4750)  # after the owner: a chown clears the setuid bit
    os.link(upper / "app" / "private", upper / "app" / "second")
    os.symlink("/etc/passwd", upper / "app" / "link")
    os.mkfifo(upper / "app" / "fifo")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(upper / "app" / "socket"))
        listed = ["/app", "/app/private", "/app/second", "/app/link", "/app/fifo", "/app/socket"]
        archive = layer_archive(str(upper), listed, limit=6)
        assert layer_archive(str(upper), listed + ["/app/unlisted"], limit=5) is None  # past the limit: a snapshot instead
    assert archive is not None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = {member.name: member for member in tar.getmembers()}
        assert sorted(members) == ["app", "app/fifo", "app/link", "app/private", "app/second"]
        private = members["app/private"]
        assert (private.isfile(), private.mode, private.uid, private.gid, private.uname) == (True, 0o4750, 65534, 65534, "")
        assert tar.extractfile(private).read() == b"secret"
        assert members["app/second"].islnk() and members["app/second"].linkname == "app/private"
        assert members["app/link"].issym() and members["app/link"].linkname == "/etc/passwd"
        assert members["app/fifo"].isfifo() and members["app"].isdir()


def test_the_layer_is_read_without_following_a_link_where_a_folder_was(tmp_path):
    """A container still running when its layer is read (a grading container after its tests) may have swapped a
    folder for a link to this host's files: reading a path through it fails, and nothing of the host is read."""
    upper, host = tmp_path / "upper", tmp_path / "host"
    (upper / "run").mkdir(parents=True)
    host.mkdir()
    (host / "results.jsonl").write_text("this host's secret")
    os.symlink(host, upper / "run" / "gymenvs")
    for path in ("/run/gymenvs/results.jsonl", "/run/../../host/results.jsonl"):
        with pytest.raises(OSError):
            layer_archive(str(upper), [path], limit=1 << 20)
    archive = layer_archive(str(upper), ["/run/gymenvs"], limit=1 << 20)  # the link itself is an entry like any other
    assert archive is not None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        (link,) = tar.getmembers()
        assert link.issym() and link.linkname == str(host)
