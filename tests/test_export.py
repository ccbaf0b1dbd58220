"""The exported KernelBench file (kernels/export.py): one self-contained Python file that
KernelBench's static checker accepts, whose embedded sources are the library's own."""

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import export

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIR = ROOT / "kernels"
HAS_GPU = torch.cuda.is_available()
EXPORTS = [("ModelNew", "fp32"), ("ModelNew", "fp16"), ("ModelNew", "bf16"), ("ModelNewHybrid", "fp32")]
REPOSITORY_MODULES = ("kernels", "modelnew", "harness", "reference", "check", "bench")
TAG = "// kb14 export"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{(model, dtype): path of the exported file}."""
    folder = tmp_path_factory.mktemp("exported")
    paths = {}
    for model, dtype in EXPORTS:
        path = folder / f"{model.lower()}_{dtype}.py"
        path.write_text(export.render(model, dtype, commit="abc1234"))
        paths[(model, dtype)] = path
    return paths


def _string_constant(tree: ast.Module, name: str) -> str:
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"no top-level {name} = '...' in the exported file")


def _load(path: Path, name: str = "exported_kb14"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("key", EXPORTS, ids=lambda k: "-".join(k) if isinstance(k, tuple) else k)
def test_exported_file_passes_the_static_rules(exported, key):
    text = exported[key].read_text()
    compile(text, str(exported[key]), "exec")  # valid Python
    assert export.static_findings(text) == []
    tree = ast.parse(text)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "torch" in imported and not imported & {"threading", "multiprocessing", "concurrent", *REPOSITORY_MODULES}
    for name in export.EMBEDDED_SOURCES:
        assert "__global__" in _string_constant(tree, name) or name == "CPP_SOURCE"


BAD_SAMPLES = {
    "try/except": "try:\n    y = f(x)\nexcept Exception:\n    y = g(x)\n",
    "try statement": "with_fallback = 1\ntry :\n    y = f(x)\nfinally:\n    y = 0\n",
    "pass statement": "class ModelNew(Model):\n    pass\n",
    "threading": "import threading\n",
    "concurrent futures": "from concurrent.futures import ThreadPoolExecutor\n",
    "multiprocessing": "import multiprocessing as mp\n",
    "lazy tensor": "class Lazy(torch.Tensor):\n    x = 1\n",
    "patched timer": "torch.cuda.synchronize = lambda: None\n",
    "patched event": "import torch\ntorch.cuda.Event.elapsed_time = lambda *a: 0.0\n",
    "patched clock": "import time\ntime.perf_counter = lambda: 0.0\n",
    "patched by setattr": "import torch\nsetattr(torch.cuda, 'synchronize', print)\n",
    "repository import": "from kernels import div_sum_scale\n",
    "repository import 2": "import modelnew\n",
    "C++ exception": "CUDA_SOURCE = '__global__ void k() { try { f(); } catch (...) {} }'\n",
}


@pytest.mark.parametrize("what", BAD_SAMPLES)
def test_the_static_rules_reject_what_they_are_for(what):
    """Each rule rejects the pattern it names (so that its passing means something)."""
    assert export.static_findings(BAD_SAMPLES[what])


def test_the_static_rules_read_past_comments():
    clean = ("from torch.utils.cpp_extension import load_inline  # try: except\n"
             "CUDA_SOURCE = '__global__ void k(float* y) { y[threadIdx.x] = 0; }  // try { } catch (...)'\n")
    assert export.static_findings(clean) == []


@pytest.mark.skipif(HAS_GPU, reason="the CPU behaviour, where no GPU is present")
@pytest.mark.parametrize("model", ["ModelNew", "ModelNewHybrid"])
def test_on_the_cpu_constructing_raises_a_clear_error(exported, model):
    path = exported[(model, "fp32")]
    # A fresh interpreter outside the repository: the file needs nothing of it to import.
    code = ("import runpy, sys\n"
            f"ns = runpy.run_path({str(path)!r})\n"
            "print('REPOSITORY', sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{REPOSITORY_MODULES!r}))\n"
            "ns['ModelNew'](16, 8, 1.5)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=path.parent, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "REPOSITORY []" in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: ") and "needs a CUDA GPU" in last, proc.stderr
    # Raised before any build: no frame inside torch's extension builder (a CUDA build of torch on a
    # machine without a GPU logs a warning from that module when it is imported; that is no build).
    assert 'cpp_extension.py", line' not in proc.stderr and "load_inline" not in proc.stderr, proc.stderr


@pytest.mark.skipif(HAS_GPU, reason="the CPU behaviour, where no GPU is present")
def test_runs_as_kernelbench_runs_a_result(exported, tmp_path):
    """KernelBench compiles the text with two lines of its own above it (the build folder),
    runs it in a plain dict and takes ModelNew from there: that works, and constructing raises."""
    for model in ("ModelNew", "ModelNewHybrid"):
        text = exported[(model, "fp32")].read_text()
        prefixed = f"import os\nos.environ['TORCH_EXTENSIONS_DIR'] = '{tmp_path}'\n" + text
        context = {}
        exec(compile(prefixed, "<string>", "exec"), context)
        with torch.no_grad(), pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            context["ModelNew"](64, 32, 1.5)


def test_cannot_run_here_names_the_missing_piece(exported, monkeypatch):
    module = _load(exported[("ModelNewHybrid", "fp32")])
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert "compiled for sm_90 only" in module.cannot_run_here() and "sm_80" in module.cannot_run_here()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    assert "sm_100" in module.cannot_run_here()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert module.cannot_run_here() is None
    monkeypatch.setattr(module, "EXPORTED_RELEASE_GROUP", "2.4-2.9")
    message = module.cannot_run_here()
    assert "reduction order of torch 2.4-2.9" in message and torch.__version__ in message
    with pytest.raises(RuntimeError, match="reduction order"):
        module.extension()


@pytest.mark.parametrize("model", ["ModelNew", "ModelNewHybrid"])
def test_constructor_matches_the_reference(exported, model, monkeypatch):
    """Same RNG calls, parameter names and state_dict as reference.Model (the build stubbed out)."""
    from reference import Model

    module = _load(exported[(model, "fp32")])
    monkeypatch.setattr(module, "extension", lambda: None)
    torch.manual_seed(42)
    ours = module.ModelNew(64, 32, 1.5)
    after_ours = torch.rand(3)
    torch.manual_seed(42)
    ref = Model(64, 32, 1.5)
    after_ref = torch.rand(3)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert torch.equal(ours.weight, ref.weight) and torch.equal(after_ours, after_ref)
    assert ours.scaling_factor == 1.5
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        ours(torch.rand(4, 64))
    with pytest.raises(ValueError, match="must be a 2-D tensor"):
        ours(torch.rand(4, 63))


def test_hybrid_path_is_taken_only_where_its_order_check_passes(exported, monkeypatch):
    """The hybrid file's gate (stubbed order check, CPU tensors): checked once per shape,
    never under capture, and TF32, misalignment or another order send it to the exact path
    with one warning per shape and reason."""
    module = _load(exported[("ModelNewHybrid", "fp32")], "exported_gate")
    checks = []
    verdict = {"holds": True}

    def fake_check(x, w):
        checks.append(tuple(x.shape))
        return verdict["holds"]

    monkeypatch.setattr(module, "single_chain_holds", fake_check)
    capturing = {"now": False}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing["now"])
    w = torch.rand(32, 64)
    x = torch.rand(8, 64)
    capturing["now"] = True
    with pytest.warns(UserWarning, match="before CUDA graph capture"):
        assert not module.takes_hybrid_path(x, w)
    capturing["now"] = False
    assert module.takes_hybrid_path(x, w) and module.takes_hybrid_path(x, w)
    assert checks == [(8, 64)]  # once per shape, not under capture
    verdict["holds"] = False
    with pytest.warns(UserWarning, match="not rows_gemm's"):
        assert not module.takes_hybrid_path(torch.rand(16, 64), w)
    assert not module.takes_hybrid_path(torch.rand(16, 64), w)  # the verdict is kept; no second check
    assert checks == [(8, 64), (16, 64)]
    misaligned = torch.rand(8 * 64 + 1)[1:].view(8, 64)
    with pytest.warns(UserWarning, match="not 16-byte aligned"):
        assert not module.takes_hybrid_path(misaligned, w)
    # Set and restored through the public flag (in torch 2.14 it is served by __getattr__, which
    # monkeypatch cannot restore).
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with pytest.warns(UserWarning, match="TF32"):
            assert not module.takes_hybrid_path(x, w)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert len(checks) == 2


# ---- the embedded sources are the library's ---------------------------------------------------


def _undo(lines: list[str], start: int = 0, name: str | None = None, files: dict | None = None):
    """Undo the export's edits: the original text of every file the lines hold, by name.

    Tagged begin/end lines delimit an inlined file (its begin line says what stood there);
    a line that stands for a file inlined above says it too; tagged #if 0 / #endif lines
    and tagged added blocks are the export's own."""
    files = {} if files is None else files
    own: list[str] = []
    i = start
    while i < len(lines):
        line = lines[i]
        begin = re.fullmatch(re.escape(TAG) + r': begin "([^"]+)"(?: \(was: (.*)\))?', line)
        if line == f"{TAG}: begin added":
            i = lines.index(f"{TAG}: end added", i) + 1
            continue
        if begin:
            if begin.group(2):
                own.append(begin.group(2))
            i = _undo(lines, i + 1, begin.group(1), files)
            continue
        if name is not None and line == f'{TAG}: end "{name}"':
            files[name] = own
            return i + 1
        was = re.fullmatch(re.escape(TAG) + r": (?:.* )?\(was: (.*)\)", line)
        if was:
            own.append(was.group(1))
        elif not (line.startswith("#if 0  " + TAG) or line == f"#endif  {TAG}"):  # those are the export's
            assert TAG not in line, line
            own.append(line)
        i += 1
    assert name is None, f"{name} is never closed"
    return files


def _disabled_regions(text: str) -> list[str]:
    return re.findall(r"^#if 0  " + re.escape(TAG) + r".*?\n(.*?)^#endif  " + re.escape(TAG) + "$", text,
                      flags=re.M | re.S)


@pytest.mark.parametrize("key", EXPORTS, ids=lambda k: "-".join(k) if isinstance(k, tuple) else k)
def test_embedded_sources_are_the_library_files(exported, key):
    model, dtype = key
    tree = ast.parse(exported[key].read_text())
    modules = [export.jit.MODULES["tail_cuda"]] + ([export.jit.MODULES["hybrid_cuda"]] if model != "ModelNew" else [])
    # The tail's units a file of this dtype embeds: fused_reduce.cu, and a 16-bit dtype's own unit.
    own = {"fp16": "fused_reduce_half.cu", "bf16": "fused_reduce_bf16.cu"}
    tail_units = {"fused_reduce.cu", *([own[dtype]] if dtype in own else [])}
    for name, top_level in (("CPP_SOURCE", [f for m in modules for f in m.cpp]),
                            ("CUDA_SOURCE", [f for m in modules[1:] for f in m.cuda] + sorted(tail_units))):
        text = _string_constant(tree, name)
        files = _undo(text.splitlines())
        assert set(top_level) <= set(files)
        # No other dtype's tail unit (their kernels are not this file's).
        if name == "CUDA_SOURCE":
            assert {f for f in files if f.startswith("fused_reduce") and f.endswith(".cu")} == tail_units
        for file, lines in files.items():
            assert lines == (SOURCE_DIR / file).read_text().splitlines(), f"{name}: {file} differs from kernels/{file}"
        # What the export adds is host glue only: no device code of its own.
        for block in re.findall(re.escape(TAG) + r": begin added\n(.*?)\n" + re.escape(TAG) + ": end added", text,
                                flags=re.S):
            assert "__global__" not in block and "__device__" not in block and "kb14::" in block, block
        # Every local include of every embedded file is embedded too (nothing left to find on disk).
        for file in files:
            for header in re.findall(r'^\s*#include\s+"([^"]+)"', (SOURCE_DIR / file).read_text(), flags=re.M):
                assert header in files, f"{file} includes {header}, which is not embedded"
        # What the export switches off: the dispatcher registrations, and the tail's other dtypes.
        kept_case = "case TailDtype::" + export.DTYPES[dtype][1] + ":"
        for region in _disabled_regions(text):
            assert region.startswith((export.REGISTRATION, export.SHIM_REGISTRATION)) or (
                region.strip().startswith("case TailDtype::") and kept_case not in region), region
        enabled = re.sub(r"^#if 0  " + re.escape(TAG) + r".*?^#endif  " + re.escape(TAG) + "$", "", text,
                         flags=re.M | re.S)
        assert "TORCH_LIBRARY" not in export.without_line_comments(enabled)
        assert export.SHIM_REGISTRATION not in enabled
        if name == "CUDA_SOURCE":
            assert re.findall(r"^[ \t]*case TailDtype::\w+:", enabled, flags=re.M) == ["    " + kept_case]


@pytest.mark.parametrize("model", ["ModelNew", "ModelNewHybrid"])
def test_embedded_python_is_the_library_code(exported, model):
    """Each definition the file copies from the library reads as in the library's file."""
    tree = ast.parse(exported[(model, "fp32")].read_text())
    ours = {name: node for node in tree.body for name in export._defined_names(node)}
    for path, names in export.PYTHON_PIECES[model]:
        library_text = (ROOT / path).read_text()
        library = {n: node for node in ast.parse(library_text).body for n in export._defined_names(node)}
        for name in names:
            assert name in ours, f"{name} of {path} is not in the file"
            assert ast.dump(ours[name]) == ast.dump(library[name]), f"{name} differs from {path}'s"
            assert ast.get_source_segment(library_text, library[name]) in exported[(model, "fp32")].read_text()


def test_header_says_what_and_where_from(exported):
    text = exported[("ModelNewHybrid", "fp32")].read_text()
    header = ast.get_docstring(ast.parse(text))
    assert "torch 2.10+" in header and "sm_90" in header and "float32" in header
    assert "batch 1024, input 8192" in " ".join(header.split()) and "hidden 8192" in header
    assert "commit abc1234" in header and "NOT bit-exact" in header
    assert f"KB14_TORCH_VERSION={export.jit.torch_order()}" in header


def test_command_line_writes_the_file_and_refuses_a_16_bit_hybrid(tmp_path):
    out = tmp_path / "result.py"
    run = subprocess.run([sys.executable, "-m", "kernels.export", "ModelNew", "-o", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "class ModelNew(nn.Module)" in out.read_text()
    run = subprocess.run([sys.executable, "-m", "kernels.export", "ModelNewHybrid", "--dtype", "fp16", "-o",
                          str(tmp_path / "no.py")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "fp32 only" in run.stderr and not (tmp_path / "no.py").exists()
    missing = tmp_path / "no_such_folder" / "result.py"
    run = subprocess.run([sys.executable, "-m", "kernels.export", "ModelNew", "-o", str(missing)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and f"cannot write {missing}" in run.stderr and "Traceback" not in run.stderr


# ---- on a GPU: the file against the reference ---------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["ModelNew", "ModelNewHybrid"])
def test_exported_model_matches_the_reference_on_the_gpu(exported, model):
    """KernelBench's shape and protocol, five trials: ModelNew's file returns the reference's
    bits, the hybrid's passes at 1e-4 on its hybrid path; both return the library model's bits."""
    import modelnew
    import reference
    from harness.protocol import kernelbench_trial_seeds, set_seed

    module = _load(exported[(model, "fp32")], f"exported_{model}")
    dev = torch.device("cuda")
    built = {}
    for name, cls in (("reference", reference.Model), ("file", module.ModelNew),
                      ("library", getattr(modelnew, model))):
        torch.manual_seed(42)
        built[name] = cls(*reference.get_init_inputs()).to(dev)
    with torch.no_grad():
        for seed in kernelbench_trial_seeds(5):
            set_seed(seed, dev)
            x = reference.get_inputs()[0].to(dev)
            want, got, library = built["reference"](x), built["file"](x), built["library"](x)
            assert torch.equal(got, library)
            if model == "ModelNew":
                assert torch.equal(got, want)
            else:
                assert built["file"].last_exact_rows is not None  # the hybrid path, not the fallback
                assert torch.allclose(want, got, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_a_16_bit_file_runs_its_dtype_only_on_the_gpu(exported):
    from reference import Model

    module = _load(exported[("ModelNew", "bf16")], "exported_bf16")
    torch.manual_seed(42)
    ref = Model(2048, 512, 1.5).cuda().bfloat16()
    torch.manual_seed(42)
    ours = module.ModelNew(2048, 512, 1.5).cuda().bfloat16()
    x = torch.rand(64, 2048, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(ours(x), ref(x))
        with pytest.raises(TypeError, match="exported for torch.bfloat16"):
            ours.float()(x.float())


@pytest.mark.gpu
def test_exported_model_new_gradients_are_the_reference_s(exported):
    from reference import Model

    module = _load(exported[("ModelNew", "fp32")], "exported_grad")
    torch.manual_seed(42)
    ref = Model(2048, 512, 1.5).cuda()
    torch.manual_seed(42)
    ours = module.ModelNew(2048, 512, 1.5).cuda()
    x = torch.rand(64, 2048, device="cuda")
    grads = []
    for model in (ref, ours):
        xi = x.clone().requires_grad_()
        (model(xi) * torch.linspace(-1, 1, 64, device="cuda").unsqueeze(1)).sum().backward()
        grads.append((xi.grad, model.weight.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


@pytest.mark.parametrize("text", ["plain\n", "ends with a quote'", "ends with a backslash\\", "holds ''' three",
                                  "a \\n escape and a \\ line continuation\\\nnext\n", "carriage\r\n"])
def test_string_literal_spells_its_text_exactly(text):
    assert ast.literal_eval(export.string_literal(text)) == text
