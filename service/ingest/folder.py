"""Reading a folder of the server without ever leaving it.

A folder that is synced (`solr-rag ingest`, `POST /jobs/sync`) is written by others: a share,
a crawler's mirror. Whatever it holds, only its own regular files are read:

- the walk opens each sub-folder and file relative to its parent's open descriptor, with
  O_NOFOLLOW: a link (to /etc/passwd, /proc/self/environ, rag.properties, a folder) is never
  followed, and a folder swapped for a link during the walk fails to open instead of leading
  elsewhere;
- nothing on another filesystem is read (a bind mount, /proc or /dev mounted inside): every
  sub-folder and file must be on the folder's own device;
- only regular files: FIFOs, sockets and devices are passed over without being opened (and a
  file is opened with O_NONBLOCK, so one swapped for a FIFO cannot hang the walk), and a file
  with several hard links is refused (it is also a file elsewhere);
- a file's declared size is checked before it is read (a sparse file of terabytes costs
  nothing), and no more than MAX_FILE_BYTES are read of any;
- the walk is bounded in depth and files; names holding control characters are refused
  (they would make ids no request can name).

Every file passed over is said (`Refused`), with why: a sync job lists them in its errors.
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from service.errors import BadRequest, ExtractionFailed, FeatureDisabled, UnsupportedFile
from service.ingest.extract import SUPPORTED_SUFFIXES, SourceDocument, extract_bytes

MAX_FILE_BYTES = 64 * 1024 * 1024  # what one file of a folder may weigh
MAX_FILES = 100_000  # files read from one folder (a job's documents are bounded the same)
MAX_DEPTH = 32  # sub-folders below the folder
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK = "a link: links are never followed (only the folder's own files are read)"
_CHANGED = "changed while the folder was read: not followed"
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class FolderUnreadable(OSError):
    """The folder itself cannot be opened as a folder (gone, not a folder, a link)."""


@dataclass(frozen=True)
class FolderFile:
    """One regular file of the folder, read."""

    relative: str  # its path below the folder, with /
    data: bytes
    modified: datetime


@dataclass(frozen=True)
class Refused:
    """A file (or sub-folder) passed over, and why."""

    relative: str
    reason: str
    # could not be read now (an I/O error, a file changed during the walk): it may still be
    # there, so a sync deletes nothing; a file refused by rule (a link, a FIFO) is no file
    unreadable: bool = False


def open_folder(path: Path) -> int:
    """A descriptor of the folder `path`, opened one component at a time without following a
    link: a resolved path (no link in it) that someone turned into a link since cannot lead
    elsewhere. FolderUnreadable otherwise."""
    if not path.is_absolute():
        raise FolderUnreadable(errno.EINVAL, "not an absolute path", str(path))
    fd = os.open("/", _DIRECTORY)
    try:
        for part in path.parts[1:]:
            if part in ("", ".", ".."):
                raise FolderUnreadable(errno.EINVAL, "the path is not resolved", str(path))
            child = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    except FolderUnreadable:
        os.close(fd)
        raise
    except OSError as error:
        os.close(fd)
        why = "a link or not a folder" if error.errno in (errno.ELOOP, errno.ENOTDIR) else None
        raise FolderUnreadable(error.errno, why or error.strerror, str(path)) from None
    return fd


# never synced, whatever jobs.sync.folders says: the kernel's and the devices' file systems
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/proc", "/sys", "/dev", "/run"))


def allowed_folder(asked: str, allowed: str) -> Path:
    """`asked` resolved (links, ..), when it is one of the comma-separated folders `allowed`
    (jobs.sync.folders) or below one: checked when a sync is asked for and again when it runs.
    FeatureDisabled when none is allowed, BadRequest when `asked` is not one of them."""
    roots = [Path(root.strip()).resolve() for root in allowed.split(",") if root.strip()]
    if not roots:
        raise FeatureDisabled(
            "no folder may be synced: list the server's folders in jobs.sync.folders"
        )
    if any(unicodedata.category(c) == "Cc" for c in asked):
        raise BadRequest("folder holds control characters")
    folder = Path(asked)
    if not folder.is_absolute():
        raise BadRequest("folder must be an absolute path")
    try:
        folder = folder.resolve()  # links and .. resolved before the check
    except (OSError, RuntimeError, ValueError):  # a link loop, a path the system refuses
        raise BadRequest("folder cannot be resolved on the server") from None
    if not any(folder == root or folder.is_relative_to(root) for root in roots):
        raise BadRequest("folder is not one of jobs.sync.folders, nor below one")
    if any(folder == system or folder.is_relative_to(system) for system in SYSTEM_FOLDERS):
        raise BadRequest("folder is a system folder (/proc, /sys, /dev, /run): never synced")
    if not folder.is_dir():
        raise BadRequest("folder is not a folder of the server")
    return folder


def source_files(paths: list[Path]) -> Iterator[tuple[Path, FolderFile | Refused]]:
    """(root, file) for every file of a supported kind under `paths` (folders or files), and
    those passed over; the root (the folder, or a file's own folder) makes the id relative.
    FileNotFoundError for a path that does not exist."""
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise FileNotFoundError(f"no such file or folder: {path}")
        root = path.resolve() if path.is_dir() else path.parent.resolve()
        for item in read_folder(path):
            yield root, item


def extract(
    file: Path, root: Path, *, language: str = "", source: str | None = None
) -> SourceDocument:
    """One file as a document, read as a folder's files are (never through a link); its id
    is relative to `root`. UnsupportedFile for an unknown kind, ExtractionFailed for a file
    that cannot be read."""
    root = root.resolve()
    for item in read_folder(file):
        if isinstance(item, Refused):
            raise ExtractionFailed(f"{file.name}: {item.reason}")
        relative = file.resolve().relative_to(root).as_posix()
        return document_of(replace(item, relative=relative), root, language=language, source=source)
    raise UnsupportedFile(f"{file.name}: {file.suffix or 'no suffix'} files are not supported")


def document_of(
    item: FolderFile, root: Path, *, language: str = "", source: str | None = None
) -> SourceDocument:
    """A file read from a folder as a document (in the caller's process: the service hands
    `extract_bytes` to its extraction worker instead)."""
    return extract_bytes(item.relative, item.data, **document_fields(item, root, source, language))


def document_fields(
    item: FolderFile, root: Path, source: str | None, language: str
) -> dict[str, object]:
    """What a folder's file gives its document besides its content: id, address, date
    (`root`: the folder read, resolved, as source_files and allowed_folder give it)."""
    return {
        "document_id": document_id(item.relative, root, source),
        "url": (root / item.relative).as_uri(),
        "language": language,
        "last_modified": item.modified,
    }


def document_id(relative: str, root: Path, source: str | None = None) -> str:
    """The source's name, then the file's path below the ingested folder: the folder's own name
    unless `source` names another, e.g. `python-reference/assert.txt`; so two folders that hold
    the same file names never replace each other's documents ("" for the bare path)."""
    name = root.name if source is None else source.strip("/")
    return f"{name}/{relative}" if name else relative


def read_folder(
    path: Path,
    *,
    suffixes: frozenset[str] = SUPPORTED_SUFFIXES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_files: int = MAX_FILES,
    max_depth: int = MAX_DEPTH,
) -> Iterator[FolderFile | Refused]:
    """The folder's files of the given kinds, in name order, read one at a time, and those
    passed over (`path` may also be one file: it is read the same way, never through a link).
    FolderUnreadable when the folder itself cannot be opened."""
    single = None if path.is_dir() else path.name
    root = open_folder((path if single is None else path.parent).resolve())
    try:
        device = os.fstat(root).st_dev
        walk = _Walk(device, suffixes, max_file_bytes, max_files, max_depth)
        if single is None:
            yield from walk.folder(root, "", 0)
        else:
            yield from walk.entries(root, "", 0, [single])
    finally:
        os.close(root)


@dataclass
class _Walk:
    device: int
    suffixes: frozenset[str]
    max_file_bytes: int
    max_files: int
    max_depth: int
    files: int = 0

    def folder(self, fd: int, prefix: str, depth: int) -> Iterator[FolderFile | Refused]:
        try:
            names = sorted(os.listdir(fd))
        except OSError as error:
            yield Refused(prefix or ".", f"cannot be listed: {error.strerror}", unreadable=True)
            return
        yield from self.entries(fd, prefix, depth, names)

    def entries(
        self, fd: int, prefix: str, depth: int, names: list[str]
    ) -> Iterator[FolderFile | Refused]:
        for name in names:
            relative = f"{prefix}{name}"
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as error:
                yield Refused(relative, f"cannot be read: {error.strerror}", unreadable=True)
                continue
            if stat.S_ISLNK(info.st_mode):
                yield Refused(relative, _LINK)
            elif stat.S_ISDIR(info.st_mode):
                yield from self._sub_folder(fd, name, relative, info, depth)
            elif Path(name).suffix.lower() not in self.suffixes:
                continue  # not a kind of file ingestion reads: not looked at
            elif self.files >= self.max_files:
                yield Refused(relative, f"the folder holds more than {self.max_files:,} files")
                return
            else:
                yield self._file(fd, name, relative, info)

    def _sub_folder(
        self, fd: int, name: str, relative: str, info: os.stat_result, depth: int
    ) -> Iterator[FolderFile | Refused]:
        refused = _bad_name(name) or self._elsewhere(info)
        if refused:
            yield Refused(relative, refused)
            return
        if depth + 1 > self.max_depth:
            yield Refused(relative, f"deeper than {self.max_depth} folders: not read")
            return
        try:
            child = os.open(name, _DIRECTORY, dir_fd=fd)
        except OSError as error:
            yield _open_failure(relative, error)
            return
        try:
            if not _same_file(os.fstat(child), info):
                yield Refused(relative, _CHANGED, unreadable=True)
                return
            yield from self.folder(child, f"{relative}/", depth + 1)
        finally:
            os.close(child)

    def _file(
        self, fd: int, name: str, relative: str, info: os.stat_result
    ) -> FolderFile | Refused:
        # checked as listed (a device is never opened), then as opened (it may have changed)
        refused = _bad_name(name) or self._refusal(info)
        if refused:
            return Refused(relative, refused)
        try:
            handle = os.open(name, _FILE, dir_fd=fd)
        except OSError as error:
            return _open_failure(relative, error)
        try:
            opened = os.fstat(handle)
            if refused := self._refusal(opened):
                return Refused(relative, refused)
            if not _same_file(opened, info):
                return Refused(relative, _CHANGED, unreadable=True)
            os.set_blocking(handle, True)
            data = _read_at_most(handle, self.max_file_bytes + 1)
        except OSError as error:
            return Refused(relative, f"cannot be read: {error.strerror}", unreadable=True)
        finally:
            os.close(handle)
        if len(data) > self.max_file_bytes:
            return Refused(relative, self._too_large(len(data)) or "too large")
        self.files += 1
        return FolderFile(relative, data, datetime.fromtimestamp(opened.st_mtime, UTC))

    def _refusal(self, info: os.stat_result) -> str | None:
        """Why a file is not read: not a regular file of its own, elsewhere, too large."""
        return _not_regular(info) or self._elsewhere(info) or self._too_large(info.st_size)

    def _elsewhere(self, info: os.stat_result) -> str | None:
        if info.st_dev != self.device:
            return "on another filesystem than the folder (a mount point): not read"
        return None

    def _too_large(self, size: int) -> str | None:
        if size > self.max_file_bytes:
            return f"{size:,} bytes, over the {self.max_file_bytes:,} a file may have"
        return None


def _not_regular(info: os.stat_result) -> str | None:
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return _LINK
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, a socket or a device): not read"
    if info.st_nlink > 1:
        return "a file with several hard links (it is also a file elsewhere): not read"
    return None


def _bad_name(name: str) -> str | None:
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "its name holds control characters: rename it"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8: rename it"
    return None


def _same_file(opened: os.stat_result, listed: os.stat_result) -> bool:
    return (opened.st_dev, opened.st_ino) == (listed.st_dev, listed.st_ino)


def _open_failure(relative: str, error: OSError) -> Refused:
    if error.errno in (errno.ELOOP, errno.EMLINK):  # made a link since it was listed
        return Refused(relative, _LINK)
    if error.errno == errno.ENOTDIR:
        return Refused(relative, _CHANGED, unreadable=True)
    return Refused(relative, f"cannot be opened: {error.strerror}", unreadable=True)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
