"""A synced folder is read without ever leaving it: links (to /etc/passwd, /proc/self/environ,
the service's own rag.properties, a folder), FIFOs, sockets, hard links, mount points, huge
sparse files and control characters in names are passed over, each with its reason; only the
folder's own regular files are read. No sockets, no Solr."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from service.config import settings_from_mapping
from service.errors import BadRequest, ConfigError, ExtractionFailed, FeatureDisabled
from service.ingest.folder import (
    FolderFile,
    FolderUnreadable,
    Refused,
    allowed_folder,
    extract,
    open_folder,
    read_folder,
    source_files,
)

SECRET = "ADMIN_TOKEN=never-published"


def walked(folder: Path, **limits: int) -> tuple[dict[str, bytes], dict[str, Refused]]:
    read, refused = {}, {}
    for item in read_folder(folder, **limits):
        if isinstance(item, FolderFile):
            read[item.relative] = item.data
        else:
            refused[item.relative] = item
    return read, refused


@pytest.fixture
def share(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "rag.properties").write_text(f"admin.token=x\n{SECRET}\n")
    (outside / "notes.txt").write_text(SECRET)
    share = tmp_path / "share"
    (share / "sub").mkdir(parents=True)
    (share / "a.txt").write_text("Alder burns hot.")
    (share / "sub" / "b.md").write_text("# Birch\nBirch bark peels.")
    (share / "passwd.txt").symlink_to("/etc/passwd")
    (share / "env.txt").symlink_to("/proc/self/environ")
    (share / "props.md").symlink_to(outside / "rag.properties")
    (share / "relative.txt").symlink_to("../outside/notes.txt")
    (share / "etc").symlink_to("/etc")
    (share / "out").symlink_to(outside)
    return share


def test_only_the_folders_own_files_are_read_never_a_link(share: Path) -> None:
    read, refused = walked(share)
    assert set(read) == {"a.txt", "sub/b.md"}
    assert b"root:" not in b"".join(read.values()) and SECRET.encode() not in b"".join(
        read.values()
    )
    for name in ("passwd.txt", "env.txt", "props.md", "relative.txt", "etc", "out"):
        assert "a link" in refused[name].reason, name
        assert not refused[name].unreadable  # by rule: not a file that may still be there


def test_fifos_sockets_and_hard_links_are_never_opened(share: Path, tmp_path: Path) -> None:
    os.mkfifo(share / "fifo.txt")  # opening it for reading would wait for a writer for ever
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(share / "socket.txt"))
    os.link(tmp_path / "outside" / "notes.txt", share / "hard.txt")
    try:
        read, refused = walked(share)
    finally:
        listener.close()
    assert set(read) == {"a.txt", "sub/b.md"}
    assert "not a regular file" in refused["fifo.txt"].reason
    assert "not a regular file" in refused["socket.txt"].reason
    assert "hard links" in refused["hard.txt"].reason


def test_a_huge_sparse_file_costs_nothing(share: Path) -> None:
    with open(share / "huge.txt", "wb") as huge:
        huge.truncate(1 << 40)  # a terabyte that takes no disk
    (share / "big.txt").write_bytes(b"x" * 2048)
    read, refused = walked(share, max_file_bytes=1024)
    assert "over the 1,024 a file may have" in refused["huge.txt"].reason
    assert "2,048 bytes" in refused["big.txt"].reason and "a.txt" in read


def test_names_with_control_characters_are_refused(share: Path) -> None:
    for name in ("new\nline.txt", "tab\tbed.txt", "esc\x1b[31m.txt"):
        (share / name).write_text("text")
    _, refused = walked(share)
    for name in ("new\nline.txt", "tab\tbed.txt", "esc\x1b[31m.txt"):
        assert "control characters" in refused[name].reason


def test_depth_and_file_count_are_bounded(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    (deep / "1" / "2" / "3").mkdir(parents=True)
    (deep / "1" / "2" / "3" / "far.txt").write_text("far")
    for n in range(5):
        (deep / f"{n}.txt").write_text(str(n))
    read, refused = walked(deep, max_depth=2, max_files=3)
    assert "deeper than 2 folders" in refused["1/2/3"].reason
    assert len(read) == 3 and "more than 3 files" in refused["3.txt"].reason


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root")
def test_a_mount_point_inside_the_folder_is_not_crossed(share: Path) -> None:
    mounted = share / "mounted"
    mounted.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "none", str(mounted)], check=False).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        (mounted / "elsewhere.txt").write_text(SECRET)
        read, refused = walked(share)
    finally:
        subprocess.run(["umount", str(mounted)], check=True)
    assert "mounted/elsewhere.txt" not in read
    assert "another filesystem" in refused["mounted"].reason


def test_a_folder_made_a_link_after_it_was_checked_is_not_opened(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a")
    checked = tmp_path / "checked"
    checked.symlink_to("/etc")  # what a swap between the check and the run leaves
    with pytest.raises(FolderUnreadable, match="a link"):
        open_folder(checked)
    os.close(open_folder(real))


def test_a_named_file_is_read_the_same_way(share: Path) -> None:
    assert extract(share / "a.txt", share, source="kb").id == "kb/a.txt"
    with pytest.raises(ExtractionFailed, match="a link"):
        extract(share / "passwd.txt", share)
    found = [(root.name, item.relative) for root, item in source_files([share / "a.txt"])]
    assert found == [("share", "a.txt")]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        list(source_files([share / "nowhere"]))


def test_allowed_folders_are_checked_resolved(share: Path, tmp_path: Path) -> None:
    assert allowed_folder(str(share / "sub"), str(share)) == share / "sub"
    for asked in ("/etc", f"{share}/../outside", "relative", f"{share}\x00", str(share / "out")):
        with pytest.raises(BadRequest):
            allowed_folder(asked, str(share))
    with pytest.raises(BadRequest, match="system folder"):
        allowed_folder("/proc/self", "/proc")
    with pytest.raises(FeatureDisabled):
        allowed_folder(str(share), "")


@pytest.mark.parametrize(
    "folders", ["/srv/a,/srv/\x00b", "/", "/proc", "/dev/shm", "srv/a", "/srv/../etc"]
)
def test_jobs_sync_folders_holds_only_plain_absolute_folders(folders: str) -> None:
    with pytest.raises(ConfigError, match=r"jobs\.sync\.folders"):
        settings_from_mapping({"jobs.sync.folders": folders}, source="test", env={})
    kept = settings_from_mapping({"jobs.sync.folders": "/srv/a, /srv/b"}, source="test", env={})
    assert kept.jobs.sync_folders == "/srv/a, /srv/b"
