"""Just-in-time build of the kernel sources, cached across processes.

The sources under kernels/ are compiled with `torch.utils.cpp_extension.load_inline`
the first time the package is imported, then reused:

* the build is keyed on everything that changes the binary: the sources, the
  compiler flags, the torch / CUDA / Python versions, the GPU architecture and the
  CPU the host code is tuned for; a changed key builds into a new folder;
* the cache lives in ``$KB14_CACHE_DIR`` (default ``~/.cache/kb14``);
* ``KB14_VERBOSE=1`` shows the compiler's commands, adds ``-lineinfo`` and
  prints ptxas's register / spill report;
* concurrent first imports build once: the builder holds an ``flock`` on a lock
  file, which the operating system releases if the builder dies, so a build
  killed half-way never blocks the next import; the next one cleans up and
  rebuilds;
* a finished build is marked by a ``.done`` file written last: a folder without
  it is never loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import inspect
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils import cpp_extension

SOURCE_DIR = Path(__file__).resolve().parent
CPU_SOURCES = ("error_message.h", "div_sum_scale.h", "fused_reduce_cpu.cpp", "colsum.cpp")
CUDA_SOURCES = ("device_math.cuh", "tail_kernels.cuh", "cuda_common.cuh", "fused_reduce.cu", "colsum.cu")
LIBRARY = "kb14"


def cache_root() -> Path:
    return Path(os.environ.get("KB14_CACHE_DIR", Path.home() / ".cache" / "kb14")).expanduser()


def verbose() -> bool:
    return os.environ.get("KB14_VERBOSE", "") not in ("", "0")


def cuda_build_wanted() -> bool:
    """Build the CUDA sources only where they can run: a CUDA torch that sees a GPU."""
    return torch.version.cuda is not None and torch.cuda.is_available()


def _cuda_arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def process_libstdcxx() -> str | None:
    """The libstdc++ shared object this process has loaded (torch's), or None.

    The extension is linked against exactly this file. A compiler whose own
    libstdc++ is static-only (the H200 machine's /opt/gcc g++) otherwise copies
    libstdc++ into the extension, and that copy's number formatting reads locale
    facet ids owned by the process's libstdc++: any message that streams a number
    crashes the process (scripts/probe_error_formatting.py shows it)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1] if line.split() else ""
            if "/libstdc++.so" in path and os.path.exists(path):
                return path
    return None


def link_flags() -> list[str]:
    """Linker flags of every extension this package builds."""
    libstdcxx = process_libstdcxx()
    return ["-fopenmp"] + ([libstdcxx] if libstdcxx else [])


def _cpu_signature() -> str:
    # -march=native tunes the host code for this CPU: key the build on its model and flags.
    flags = model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = line
            elif line.startswith("model name") and not model:
                model = line
    return f"{platform.machine()}|{model}|{flags}"


@dataclass(frozen=True)
class BuildSpec:
    with_cuda: bool
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    arch: str
    ldflags: tuple[str, ...]

    @classmethod
    def for_this_machine(cls) -> "BuildSpec":
        with_cuda = cuda_build_wanted()
        # fp-contract off: a fused multiply-add would round differently from the reference.
        # -fopenmp: at::parallel_for is inline; without it the CPU kernel would run on
        # one thread (and the two-pass split of a single row would not match torch's).
        cflags = ["-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-fopenmp"]
        # The reduction order to reproduce depends on the torch release (fused_reduce.cu).
        major, minor = (int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
        # (The C++ standard is left to torch: 2.14's headers need C++20, older ones C++17.)
        cuda_cflags = ["-O3", "--fmad=false", f"-DKB14_TORCH_VERSION={major * 100 + minor}"]
        if verbose():
            cuda_cflags += ["-lineinfo", "-Xptxas=-v"]
        return cls(with_cuda, tuple(cflags), tuple(cuda_cflags), _cuda_arch() if with_cuda else "",
                   tuple(link_flags()))

    def sources(self) -> tuple[str, ...]:
        return CPU_SOURCES + (CUDA_SOURCES if self.with_cuda else ())

    def key(self) -> str:
        h = hashlib.sha256()
        for name in self.sources():
            h.update(name.encode())
            h.update((SOURCE_DIR / name).read_bytes())
        parts = [
            repr(self),
            torch.__version__,
            str(torch.version.cuda),
            sys.version,
            _cpu_signature(),
            _ninja_version(),
        ]
        h.update("\n".join(parts).encode())
        return h.hexdigest()[:16]

    def name(self) -> str:
        return f"{LIBRARY}_{'cuda' if self.with_cuda else 'cpu'}_{self.key()}"


def _ninja_version() -> str:
    try:
        return importlib.metadata.version("ninja")
    except importlib.metadata.PackageNotFoundError:
        return "system"


def _say(message: str) -> None:
    print(f"[kb14] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _exclusive(lock_path: Path, what: str):
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another process that is building {what} (lock: {lock_path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(spec: BuildSpec, name: str, build_dir: Path) -> Path:
    if build_dir.exists():
        # Left by a build that died: nobody else can be using it while we hold the lock.
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    # load_inline joins the sources of each kind into one translation unit; the headers
    # are listed only so that they key the build (the sources include them).
    cpp = [(SOURCE_DIR / n).read_text() for n in CPU_SOURCES if n.endswith(".cpp")]
    cuda = [(SOURCE_DIR / n).read_text() for n in CUDA_SOURCES if n.endswith(".cu")] if spec.with_cuda else None
    options = {}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        options["no_implicit_headers"] = True  # skip <torch/extension.h>: pybind11 is not used
    arch_env = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if spec.with_cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = spec.arch
    start = time.perf_counter()
    _say(f"compiling {'CPU + CUDA' if spec.with_cuda else 'CPU'} kernels into {build_dir} (first use only) ...")
    try:
        cpp_extension.load_inline(
            name=name,
            cpp_sources=cpp,
            cuda_sources=cuda,
            extra_cflags=list(spec.cflags),
            extra_cuda_cflags=list(spec.cuda_cflags),
            extra_ldflags=list(spec.ldflags),
            extra_include_paths=[str(SOURCE_DIR)],
            build_directory=str(build_dir),
            verbose=verbose(),
            is_python_module=False,
            **options,
        )
    finally:
        if spec.with_cuda:
            if arch_env is None:
                os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
            else:
                os.environ["TORCH_CUDA_ARCH_LIST"] = arch_env
    _say(f"built in {time.perf_counter() - start:.1f} s")
    return build_dir / f"{name}.so"


_loaded: Path | None = None


def load_library() -> Path:
    """Build (once per key) and load the kernels; return the shared library's path."""
    global _loaded
    if _loaded is not None:
        return _loaded
    spec = BuildSpec.for_this_machine()
    name = spec.name()  # hashes every source: once per process
    root = cache_root()
    build_dir = root / name
    library = build_dir / f"{name}.so"
    done = build_dir / ".done"
    if not done.exists():
        with _exclusive(root / f"{name}.lock", name):
            if not done.exists():
                library = _compile(spec, name, build_dir)
                done.write_text(name)
    if not any(p.endswith(library.name) for p in torch.ops.loaded_libraries):
        torch.ops.load_library(str(library))
    _loaded = library
    return library
