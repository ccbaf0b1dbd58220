"""Just-in-time builds of the kernel modules, one per op group and device, cached across processes.

Nothing is compiled at import. The first call of an op on a device builds (or loads
from the cache) the module that holds that op's kernels for that device:

    tail_cpu      div_sum_scale on CPU tensors: tail_cpu.cpp and tail_cpu_16bit.cpp, no
                  torch headers (loaded with ctypes; the op's glue is Python, kernels/tail_cpu.py)
    tail_cuda     div_sum_scale on CUDA tensors: fused_reduce.cu (the launcher, no
                  torch headers; the other types' kernels in fused_reduce_double.cu,
                  _half.cu and _bf16.cu) and fused_reduce_cuda.cpp (the op and its
                  registration)
    tail_cuda_autograd
                  div_sum_scale's C++ autograd for CUDA tensors: tail_autograd_cuda.cpp;
                  loaded after tail_cuda without holding up the first call (below)
    colsum_cpu    colsum and colsum_matvec on CPU tensors: colsum.cpp and
                  colsum_autograd_cpu.cpp
    colsum_cuda   the same on CUDA tensors: colsum.cu and colsum_cuda.cpp
    hybrid_cuda   hybrid_rows, rows_gemm and gemm_order_probe (CUDA only): hybrid.cu and
                  hybrid_cuda.cpp

Each module is compiled with `torch.utils.cpp_extension.load` (each source its own
translation unit, host compiler or nvcc, which ninja compiles in parallel):

* a build is keyed on everything that changes the binary: the module's sources and
  the headers they include, the compiler flags, the torch / CUDA / Python versions,
  the GPU architecture (CUDA modules; with the torch release's reduction order,
  KB14_TORCH_VERSION) and the CPU the host code is tuned for; a changed key builds
  into a new folder;
* the cache lives in ``$KB14_CACHE_DIR`` (default ``~/.cache/kb14``);
* ``KB14_VERBOSE=1`` shows the compiler's commands, adds ``-lineinfo`` and
  prints ptxas's register / spill report;
* concurrent first uses build once: the builder holds an ``flock`` on a lock file,
  which the operating system releases if the builder dies, so a build killed
  half-way never blocks the next one; the next one cleans up and rebuilds;
* a finished build is marked by a ``.done`` file written last: a folder without
  it is never loaded;
* a build prints one line to stderr (what, where, roughly how long), then its time.

A module can name others to load after it (``Module.after``): those do not hold up
the first call. If cached they are loaded at once; otherwise a child process builds
them (its output in a log beside the cache entry) and the next call of
`kernels.div_sum_scale` after it ends loads them (`load_finished_builds`). A process,
not a thread: `check.py --strict` fails a candidate that leaves a thread running, the
interpreter's exit does not wait for the build, and the build still finishes for the
next process. The C++ autograd is such a module: until it is loaded the op's Python
autograd formula serves CUDA calls, with the same bits and a few microseconds more
host time.

`build_all()` (or ``python -m kernels.build``) builds every module this machine can
run, in parallel, ahead of time.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

SOURCE_DIR = Path(__file__).resolve().parent
LIBRARY = "kb14"


@dataclass(frozen=True)
class Module:
    """What one module is made of (the machine-specific flags are added by `JitSpec`)."""

    device: str  # "cpu" or "cuda"
    what: str  # for the progress line
    cpp: tuple[str, ...]  # host-compiler sources (a translation unit each)
    cuda: tuple[str, ...]  # nvcc sources (a translation unit each)
    headers: tuple[str, ...]  # what they include from this folder: they key the build
    torch_free: bool  # compiled without torch headers in its host units (fast)
    default_seconds: float  # rough build time on the 2-core development machine
    after: tuple[str, ...] = ()  # modules loaded once this one is, built in the background


MODULES = {
    "tail_cpu": Module("cpu", "div_sum_scale's CPU kernels", ("tail_cpu.cpp", "tail_cpu_16bit.cpp"), (),
                       ("tail_cpu.h",), True, 5),
    "tail_cuda": Module("cuda", "div_sum_scale's CUDA kernels and op",
                        ("fused_reduce_cuda.cpp",),
                        ("fused_reduce.cu", "fused_reduce_double.cu", "fused_reduce_half.cu",
                         "fused_reduce_bf16.cu"),
                        ("error_message.h", "div_sum_scale.h", "fused_reduce_launch.h", "device_shape.h",
                         "device_math.cuh", "fused_reduce_order.h", "fused_reduce_dispatch.h",
                         "fused_reduce_general.cuh", "fused_reduce_lean.cuh", "fused_reduce_switch.cuh"), False, 8,
                        after=("tail_cuda_autograd",)),
    "tail_cuda_autograd": Module("cuda", "div_sum_scale's C++ autograd for CUDA tensors",
                                 ("tail_autograd_cuda.cpp",), (), (), False, 14),
    "colsum_cpu": Module("cpu", "the column-sum CPU kernels and op", ("colsum.cpp", "colsum_autograd_cpu.cpp"), (),
                         ("error_message.h", "div_sum_scale.h", "colsum.h", "colsum_autograd.h"), False, 21),
    "colsum_cuda": Module("cuda", "the column-sum CUDA kernels and op", ("colsum_cuda.cpp",), ("colsum.cu",),
                          ("error_message.h", "div_sum_scale.h", "colsum.h", "colsum_autograd.h", "device_shape.h", "device_math.cuh",
                           "colsum_device.cuh", "cuda_common.cuh"), False, 25),
    "hybrid_cuda": Module("cuda", "the hybrid model's CUDA kernels and ops", ("hybrid_cuda.cpp",), ("hybrid.cu",),
                          ("error_message.h", "div_sum_scale.h", "device_shape.h", "device_math.cuh", "hybrid_launch.h",
                           "fused_reduce_order.h", "fused_reduce_dispatch.h", "fused_reduce_general.cuh",
                           "fused_reduce_lean.cuh"), False, 9),
}


def cache_root() -> Path:
    return Path(os.environ.get("KB14_CACHE_DIR", Path.home() / ".cache" / "kb14")).expanduser()


def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        why = "" if os.access(folder, os.W_OK | os.X_OK) else "not writable"
    except OSError as exc:
        why = str(exc)
    if why:
        raise RuntimeError(f"kb14: the build cache {folder} cannot be written ({why}); set KB14_CACHE_DIR to a "
                           f"writable folder")


def verbose() -> bool:
    return os.environ.get("KB14_VERBOSE", "") not in ("", "0")


def cuda_build_wanted() -> bool:
    """CUDA modules are built only where they can run: a CUDA torch that sees a GPU."""
    return torch.version.cuda is not None and torch.cuda.is_available()


# The oldest GPU the CUDA sources build for: their loads carry L2 cache hints (sm_80 and newer).
MIN_CUDA_CAPABILITY = (8, 0)


def _cuda_arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < MIN_CUDA_CAPABILITY:
        raise RuntimeError(f"kb14: the CUDA kernels need a GPU of compute capability 8.0 or newer (sm_80: A100, "
                           f"H100, ...); {torch.cuda.get_device_name()} is sm_{major}{minor}")
    return f"{major}{minor}"


def process_libstdcxx() -> str | None:
    """The libstdc++ shared object this process has loaded (torch's), or None.

    The extensions are linked against exactly this file. A compiler whose own
    libstdc++ is static-only (the H200 machine's /opt/gcc g++) otherwise copies
    libstdc++ into the extension, and that copy's number formatting reads locale
    facet ids owned by the process's libstdc++: any message that streams a number
    crashes the process (scripts/experiments/probe_error_formatting.py shows it)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1] if line.split() else ""
            if "/libstdc++.so" in path and os.path.exists(path):
                return path
    return None


_link_flags: list[str] | None = None


def link_flags() -> list[str]:
    """Linker flags of every extension this package builds (read once per process)."""
    global _link_flags
    if _link_flags is None:
        libstdcxx = process_libstdcxx()
        _link_flags = ["-fopenmp"] + ([libstdcxx] if libstdcxx else [])
    return list(_link_flags)


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


def _ninja_version() -> str:
    try:
        return importlib.metadata.version("ninja")
    except importlib.metadata.PackageNotFoundError:
        return "system"


def version_order(torch_version: str) -> int:
    """A torch version string like "2.11.0+cu130" as major * 100 + minor (211)."""
    major, minor = (int(v) for v in torch_version.split("+")[0].split(".")[:2])
    return major * 100 + minor


def torch_order() -> int:
    """The installed torch as major * 100 + minor: the CUDA reduction order to reproduce."""
    return version_order(torch.__version__)


def release_group(torch_version: str) -> str:
    """The release group whose CUDA order the tail reproduces ("2.4-2.9" or "2.10+") for a torch
    version string like "2.11.0+cu130"."""
    order = version_order(torch_version)
    if order < 204:
        raise ValueError(f"torch {torch_version}: the library covers releases 2.4 and later")
    return "2.4-2.9" if order < 210 else "2.10+"


# Host-compiler flags of every module. fp-contract off: a fused multiply-add would round
# differently from the reference. -fopenmp: the CPU kernels split rows across OpenMP
# threads as torch does.
HOST_FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-fopenmp")


# Parts of a CUDA unit's device code that nvcc optimises in parallel: the tail's unit took 11.8 s
# on the H200 machine's 16 cores in one part (cicc 5.1 s, ptxas 3.4 s), longer than the host unit
# beside it (8.5 s), and so set the first use's wait.
NVCC_SPLIT = 8


def nvcc_split_parts() -> int:
    """NVCC_SPLIT where nvcc takes --split-compile (CUDA 12.2 and newer, judged by the CUDA
    release torch was built for, which cpp_extension's nvcc must match), else 1."""
    release = tuple(int(part) for part in (torch.version.cuda or "0.0").split(".")[:2])
    return NVCC_SPLIT if release >= (12, 2) else 1


def nvcc_flags(arch: str, torch_version: int | None = None) -> list[str]:
    """nvcc's flags for a module's CUDA unit on GPU architecture `arch` ("90" for sm_90).

    The reduction order to reproduce depends on the torch release (fused_reduce_order.h;
    default: the installed one); the architecture is given as an -gencode flag (torch
    then adds none of its own). The device code is
    optimised in nvcc_split_parts() parts at once (--split-compile): a fixed count, as the
    code nvcc generates depends on it, not on the machine's cores."""
    version = torch_order() if torch_version is None else torch_version
    parts = nvcc_split_parts()
    return ["-O3", "--fmad=false", f"-DKB14_TORCH_VERSION={version}",
            f"-gencode=arch=compute_{arch},code=sm_{arch}",
            *([f"--split-compile={parts}"] if parts > 1 else [])]


def torch_cxx_standard() -> str:
    """The C++ standard the installed torch's headers need (2.14's: C++20; older: C++17),
    for compiling against them outside cpp_extension, which picks it itself."""
    from torch.utils.cpp_extension import include_paths

    aten_h = next(Path(p) / "ATen" / "ATen.h" for p in include_paths() if (Path(p) / "ATen" / "ATen.h").exists())
    return "-std=c++20" if "C++20" in aten_h.read_text() else "-std=c++17"


@dataclass(frozen=True)
class JitSpec:
    """One module, as built on this machine."""

    name: str
    module: Module
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    ldflags: tuple[str, ...]

    @classmethod
    def for_this_machine(cls, name: str) -> "JitSpec":
        module = MODULES[name]
        cuda_cflags: list[str] = []
        if module.cuda:
            cuda_cflags = nvcc_flags(_cuda_arch())
            if verbose():
                cuda_cflags += ["-lineinfo", "-Xptxas=-v"]
        # (The C++ standard is left to torch: 2.14's headers need C++20, older ones C++17.)
        return cls(name, module, HOST_FLAGS, tuple(cuda_cflags), tuple(link_flags()))

    def files(self) -> tuple[str, ...]:
        return self.module.cpp + self.module.cuda + self.module.headers

    def key(self) -> str:
        """A hash of what makes the binary: sources, headers, flags, toolchain and torch (not the
        progress line's text, the time estimate or the modules loaded after it)."""
        h = hashlib.sha256()
        for name in self.files():
            h.update(name.encode())
            h.update((SOURCE_DIR / name).read_bytes())
        m = self.module
        binary = (self.name, m.device, m.cpp, m.cuda, m.headers, m.torch_free, self.cflags, self.cuda_cflags,
                  self.ldflags)
        parts = [repr(binary), torch.__version__, str(torch.version.cuda), sys.version, _cpu_signature(),
                 _ninja_version()]
        h.update("\n".join(parts).encode())
        return h.hexdigest()[:16]

    @functools.cached_property
    def build_name(self) -> str:
        """The cache folder's name: its sources read and hashed once per spec, not at every look."""
        return f"{LIBRARY}_{self.name}_{self.key()}"


_say_lock = threading.Lock()


def _say(message: str) -> None:
    with _say_lock:  # one whole line at a time, from parallel builds too
        sys.stderr.write(f"[kb14] {message}\n")
        sys.stderr.flush()


@contextlib.contextmanager
def _exclusive(lock_path: Path, what: str):
    _check_writable(lock_path.parent)
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


def _timings_path() -> Path:
    return cache_root() / "build_seconds.json"


def _estimate(spec: JitSpec) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        seconds = float(json.loads(_timings_path().read_text())[spec.name])
        return f"about {seconds:.0f} s (its last build here)"
    return f"about {spec.module.default_seconds:.0f} s on 2 cores, less on more"


def _record(spec: JitSpec, seconds: float) -> None:
    """Remember the build's time for the next progress line (best effort)."""
    path = _timings_path()
    with contextlib.suppress(OSError, ValueError), open(cache_root() / "build_seconds.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        data = json.loads(path.read_text()) if path.exists() else {}
        data[spec.name] = round(seconds, 1)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)


def _compiling_line(spec: JitSpec, build_dir: Path, how: str = "") -> str:
    module = spec.module
    where = f"for sm_{_cuda_arch()} " if module.cuda else ""
    return (f"compiling {module.what} ({', '.join(module.cpp + module.cuda)}) {where}into {build_dir}{how}: "
            f"first use only, {_estimate(spec)} ...")


def _compile(spec: JitSpec, name: str, build_dir: Path) -> Path:
    if build_dir.exists():
        # Left by a build that died: nobody else can be using it while we hold the lock.
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    from torch.utils import cpp_extension  # not at import: it costs 0.1-0.2 s

    # The headers are listed in the module only so that they key the build (the sources include them).
    module = spec.module
    _say(_compiling_line(spec, build_dir))
    start = time.perf_counter()
    cpp_extension.load(
        name=name,
        sources=[str(SOURCE_DIR / n) for n in module.cpp + module.cuda],
        extra_cflags=list(spec.cflags),
        extra_cuda_cflags=list(spec.cuda_cflags),
        extra_ldflags=list(spec.ldflags),
        extra_include_paths=[str(SOURCE_DIR)],
        build_directory=str(build_dir),
        verbose=verbose(),
        is_python_module=False,
    )
    seconds = time.perf_counter() - start
    _say(f"built {spec.name} in {seconds:.1f} s")
    _record(spec, seconds)
    return build_dir / f"{name}.so"


_specs: dict[str, JitSpec] = {}
_loaded: dict[str, Path] = {}
_locks = {name: threading.Lock() for name in MODULES}


def spec(name: str) -> JitSpec:
    """The module's spec on this machine, made once per process."""
    if name not in _specs:
        _specs[name] = JitSpec.for_this_machine(name)
    return _specs[name]


def _cache_entry(name: str) -> tuple[str, Path]:
    build_name = spec(name).build_name
    return build_name, cache_root() / build_name


def is_built(name: str) -> bool:
    """Whether the module's cache entry is complete (it loads without compiling)."""
    return (_cache_entry(name)[1] / ".done").exists()


def build(name: str) -> Path:
    """Build the module if its cache entry is missing (once per key, across processes);
    return its shared library's path. Does not load it."""
    build_name, build_dir = _cache_entry(name)
    library = build_dir / f"{build_name}.so"
    done = build_dir / ".done"
    if not done.exists():
        with _exclusive(cache_root() / f"{build_name}.lock", build_name):
            if not done.exists():
                library = _compile(spec(name), build_name, build_dir)
                done.write_text(build_name)
    return library


def load(name: str) -> Path:
    """Build (once per key) and load the module; return its shared library's path.
    Loading registers its kernels with torch; a torch_free module is only built here."""
    library = _loaded.get(name)
    if library is not None:
        return library
    with _locks[name]:
        if name not in _loaded:
            library = build(name)
            # A torch-free module registers nothing: its caller opens it (ctypes).
            registers_ops = not MODULES[name].torch_free
            if registers_ops and not any(p.endswith(library.name) for p in torch.ops.loaded_libraries):
                torch.ops.load_library(str(library))
            _loaded[name] = library
    for other in MODULES[name].after:
        _load_soon(other)
    return _loaded[name]


@dataclass
class BackgroundBuild:
    process: subprocess.Popen
    log: Path


# Modules being built by a child process, by name; loaded by load_finished_builds.
background_builds: dict[str, BackgroundBuild] = {}
_not_started: set[str] = set()
_background_lock = threading.Lock()


def _load_soon(name: str) -> None:
    """Load the module now if it is cached, else start its build in a child process."""
    if name in _loaded:
        return
    if is_built(name):
        load(name)
        return
    with _background_lock:
        if name in background_builds or name in _loaded or name in _not_started:
            return
        try:
            background_builds[name] = _start_background_build(name)
        except OSError as exc:  # what it would replace stays in use; the caller's call goes on
            _not_started.add(name)
            _say(f"could not start building {name} in the background, so it is not used: {exc}")


def _start_background_build(name: str) -> BackgroundBuild:
    """`build(name)` in a child process, which this one's exit leaves running (a Ctrl-C to
    both stops it: the next first use builds again). Such modules are host code only
    (tests/test_jit.py): the child never touches the GPU."""
    build_name, build_dir = _cache_entry(name)
    log = cache_root() / f"{build_name}.log"  # the root holds the module this one loads after
    _say(_compiling_line(spec(name), build_dir, f" in the background (log: {log})"))
    # The path first: a `kernels` folder in the working directory is not this one.
    code = (f"import sys; sys.path.insert(0, {str(SOURCE_DIR.parent)!r}); from kernels import jit; "
            f"jit.build({name!r})")
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)
    return BackgroundBuild(process, log)


def load_finished_builds(wait: bool = False) -> None:
    """Load the modules whose background builds have ended (with `wait`, wait for all).
    A build that failed is reported once, with its log's end; what it would have
    replaced stays in use."""
    for name, started in list(background_builds.items()):
        if not wait and started.process.poll() is None:
            continue
        with _background_lock:
            if background_builds.pop(name, None) is None:
                continue  # another thread took it
        status = started.process.wait()
        if status == 0 and is_built(name):
            load(name)
            continue
        tail = ""
        with contextlib.suppress(OSError):
            tail = "".join(started.log.read_text(errors="replace").splitlines(keepends=True)[-20:])
        _say(f"building {name} in the background failed (exit status {status}), so it is not used; "
             f"the end of {started.log}:\n{tail}")


def modules_for(device_type: str) -> list[str]:
    return [name for name, m in MODULES.items() if m.device == device_type]


def build_all(devices: tuple[str, ...] | None = None, parallel: bool = True) -> dict[str, Path]:
    """Build every module this machine can run (CPU, and CUDA where a GPU is visible), the
    independent modules in parallel; return {module: library}. Nothing is loaded."""
    if devices is None:
        devices = ("cpu", "cuda") if cuda_build_wanted() else ("cpu",)
    if "cuda" in devices and not cuda_build_wanted():
        raise RuntimeError("kb14: no CUDA GPU visible to this torch; the CUDA modules are built for the GPU's "
                           "architecture, on a machine that has one")
    names = [name for d in devices for name in modules_for(d)]
    for name in names:
        spec(name)  # hash in this thread: the specs are cached
    if not parallel or len(names) == 1:
        return {name: build(name) for name in names}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(build, names)))
