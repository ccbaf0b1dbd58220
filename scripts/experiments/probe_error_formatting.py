"""Which error messages a load_inline extension can raise on this machine's torch.

Builds a tiny extension whose ops each fail in one way (a TORCH_CHECK streaming an
integer, a string literal, a dtype, a pre-formatted std::string, a plain ostringstream
without any throw, ...) and calls each in a process of its own (forked once torch is
imported), so that a crash is counted, not fatal. A SIGSEGV handler in the extension
prints the C++ backtrace.

    python scripts/experiments/probe_error_formatting.py [--json out.json] [--library-link] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <csignal>
#include <dlfcn.h>
#include <cstdio>
#include <execinfo.h>
#include <locale>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {
void on_segv(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = "\n[probe] fatal signal; C++ backtrace:\n";
  write(2, msg, sizeof(msg) - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
const bool installed = [] { signal(SIGSEGV, on_segv); signal(SIGABRT, on_segv); return true; }();

at::Tensor check_int(const at::Tensor& t) { TORCH_CHECK(false, "rank ", t.dim()); return t; }
at::Tensor check_literal(const at::Tensor& t) { TORCH_CHECK(false, "a literal"); return t; }
at::Tensor check_dtype(const at::Tensor& t) { TORCH_CHECK(false, "dtype ", t.scalar_type()); return t; }
at::Tensor check_string(const at::Tensor& t) { TORCH_CHECK(false, std::string("rank ") + std::to_string(t.dim())); return t; }
at::Tensor check_two_strings(const at::Tensor& t) { TORCH_CHECK(false, "rank ", std::to_string(t.dim()), "-D"); return t; }
at::Tensor stream_int_no_throw(const at::Tensor& t) { std::ostringstream ss; ss << t.dim(); return t + static_cast<double>(ss.str().size()); }
at::Tensor stream_double_no_throw(const at::Tensor& t) { std::ostringstream ss; ss << 1.5; return t + static_cast<double>(ss.str().size()); }
at::Tensor stream_int_classic(const at::Tensor& t) { std::ostringstream ss; ss.imbue(std::locale::classic()); ss << t.dim(); return t + static_cast<double>(ss.str().size()); }
at::Tensor throw_runtime_error(const at::Tensor& t) { throw std::runtime_error("plain std::runtime_error"); return t; }
at::Tensor torch_own_error(const at::Tensor& t) { return t.view({7, 7}); }
// Which loaded object each libstdc++ entry point of number formatting resolves to.
at::Tensor where_symbols(const at::Tensor& t) {
  for (const char* name : {"_ZNSo9_M_insertIlEERSoT_", "_ZNSo9_M_insertIdEERSoT_", "_ZNSolsEi",
                           "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
                           "_ZNSt6locale7classicEv", "_ZNSt6localeC1Ev", "_ZNKSt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE6do_putES3_RSt8ios_basecl",
                           "_ZNSt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE2idE",
                           "_ZSt9use_facetISt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEEERKT_RKSt6locale",
                           "_ZNSt9basic_iosIcSt11char_traitsIcEE4initEPSt15basic_streambufIcS1_E"}) {
    void* p = dlsym(RTLD_DEFAULT, name);
    Dl_info info{};
    const char* where = (p && dladdr(p, &info) && info.dli_fname) ? info.dli_fname : "(not found)";
    fprintf(stderr, "[probe] %s -> %s\n", name, where);
  }
  return t;
}
}  // namespace

TORCH_LIBRARY(kb14probe, m) {
  for (const char* name : {"check_int", "check_literal", "check_dtype", "check_string", "check_two_strings",
                           "stream_int_no_throw", "stream_double_no_throw", "stream_int_classic",
                           "throw_runtime_error", "torch_own_error", "where_symbols"})
    m.def((std::string(name) + "(Tensor t) -> Tensor").c_str());
}
TORCH_LIBRARY_IMPL(kb14probe, CompositeExplicitAutograd, m) {
  m.impl("check_int", &check_int);
  m.impl("check_literal", &check_literal);
  m.impl("check_dtype", &check_dtype);
  m.impl("check_string", &check_string);
  m.impl("check_two_strings", &check_two_strings);
  m.impl("stream_int_no_throw", &stream_int_no_throw);
  m.impl("stream_double_no_throw", &stream_double_no_throw);
  m.impl("stream_int_classic", &stream_int_classic);
  m.impl("throw_runtime_error", &throw_runtime_error);
  m.impl("torch_own_error", &torch_own_error);
  m.impl("where_symbols", &where_symbols);
}
"""

CASES = ("check_int", "check_literal", "check_dtype", "check_string", "check_two_strings",
         "stream_int_no_throw", "stream_double_no_throw", "stream_int_classic", "throw_runtime_error",
         "torch_own_error", "where_symbols")

def run_case(library: str, case: str) -> None:
    """One case, in a forked process of its own (stdout: RETURNED or RAISED and the error)."""
    import faulthandler
    import torch
    faulthandler.enable()
    torch.ops.load_library(library)  # build() loaded it already: this one finds it loaded
    try:
        getattr(torch.ops.kb14probe, case)(torch.zeros(2))
        print("RETURNED")
    except Exception as e:
        print("RAISED", type(e).__name__, str(e).splitlines()[0][:120])


def build(build_dir: Path, library_link: bool) -> Path:
    """The probe extension, linked as load_inline links by default or, with
    `library_link`, as kernels.jit links this library's extension."""
    from torch.utils import cpp_extension
    import inspect
    options = {}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        options["no_implicit_headers"] = True
    ldflags = ["-rdynamic"]
    if library_link:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from kernels.jit import link_flags
        ldflags += link_flags()
    cpp_extension.load_inline(name="kb14probe", cpp_sources=[SOURCE], build_directory=str(build_dir),
                              is_python_module=False, extra_ldflags=ldflags, **options)
    return build_dir / "kb14probe.so"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    parser.add_argument("--library-link", action="store_true",
                        help="link the probe as kernels/jit.py links the library (the fix)")
    parser.add_argument("--check", action="store_true", help="exit 1 if any case crashed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb14probe_") as tmp:  # no build left behind
        return probe(Path(tmp), args)


def probe(build_dir: Path, args) -> int:
    import torch
    library = build(build_dir, args.library_link)
    facts = {"torch": torch.__version__, "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
             "library_link": args.library_link}
    maps = [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
            if "libstdc++" in line or "libgcc_s" in line]
    facts["libstdcxx_in_parent"] = sorted(set(maps))
    compilers = subprocess.run(["bash", "-c", "c++ --version | head -1; strings -a $(python -c 'import torch,os;"
                                "print(os.path.join(os.path.dirname(torch.__file__),\"lib\",\"libc10.so\"))')"
                                " | grep -m3 'GCC: '"], capture_output=True, text=True).stdout
    facts["compilers"] = compilers.strip().splitlines()
    # How the extension was linked, and how much of libstdc++ it carries itself.
    ninja = (build_dir / "build.ninja").read_text().splitlines()
    facts["build_flags"] = [line for line in ninja if line.startswith(("cflags", "ldflags", "cxx"))]
    facts["env"] = {k: os.environ[k] for k in ("CXX", "CC", "CXXFLAGS", "CFLAGS", "LDFLAGS", "LD_PRELOAD",
                                                "LD_LIBRARY_PATH") if k in os.environ}
    nm = subprocess.run(["bash", "-c", f"nm -C --defined-only {library} | grep -c ' std::locale' ; "
                         f"readelf -d {library} | grep NEEDED; c++ -dumpspecs | grep -A1 -i 'static-libstdc' | head -4"],
                        capture_output=True, text=True).stdout
    facts["library_carries"] = nm.strip().splitlines()

    def call(case):  # forked, a process of its own: a crash is counted, and no case sees another's state
        out, err = build_dir / f"{case}.out", build_dir / f"{case}.err"
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                for fd, path in ((1, out), (2, err)):
                    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
                run_case(str(library), case)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
        deadline = time.monotonic() + 120
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        return subprocess.CompletedProcess(case, os.waitstatus_to_exitcode(done[1]), out.read_text(), err.read_text())

    results = {}
    procs = [call(case) for case in CASES]  # one at a time: the cases take milliseconds once forked
    for case, proc in zip(CASES, procs):
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        outcome = "crashed" if proc.returncode < 0 else (lines[0] if lines and lines[0].startswith(("RAISED", "RETURNED")) else "other")
        marker = next((i for i, line in enumerate(lines) if "[probe]" in line), len(lines))
        results[case] = {"returncode": proc.returncode, "outcome": outcome,
                         "stderr": lines[marker:marker + 14] if marker < len(lines) else lines[-14:]}
        print(f"{case:24s} rc={proc.returncode:4d} {outcome}")
    facts["cases"] = results
    if args.json:
        Path(args.json).write_text(json.dumps(facts, indent=1))
    print(json.dumps({k: v for k, v in facts.items() if k != "cases"}, indent=1))
    crashed = [case for case, r in results.items() if r["outcome"] == "crashed"]
    if crashed:
        print(f"crashed: {', '.join(crashed)}")
    return 1 if args.check and crashed else 0


if __name__ == "__main__":
    sys.exit(main())
