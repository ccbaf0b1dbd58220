"""The column-sum fast path: kb14::colsum, kb14::colsum_matvec and ModelNewColsum.

CPU tests run everywhere (small sizes, a few seconds on two cores); the GPU tests at
the end are marked `gpu` and skipped without one.
"""

import copy
import io

import pytest
import torch
import torch.nn as nn

import reference
from kernels import colsum, colsum_matvec, colsum_matvec_reference, div_sum_scale, div_sum_scale_reference
from kernels.colsum_ops import COLSUM, MATVEC
from modelnew import ModelNewColsum
from tests.cases import seeded_pair

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SCALE = 1.5


def tol(dtype) -> float:
    """One rounding to dtype (<= 1 ulp relative); fp64 outputs carry fp64 summation noise."""
    return 1e-12 if dtype == torch.float64 else torch.finfo(dtype).eps


def rms(t: torch.Tensor) -> float:
    return t.double().pow(2).mean().sqrt().item()


def fresh(model: ModelNewColsum, x: torch.Tensor) -> torch.Tensor:
    """What the model must return: the ops applied to the weight as it is now."""
    with torch.no_grad():
        return colsum_matvec(x, colsum(model.weight), model.scaling_factor / 2)


def make(input_size=96, hidden=200, seed=0):
    torch.manual_seed(seed)
    return ModelNewColsum(input_size, hidden, SCALE)


def x_for(model, batch=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, model.weight.shape[1], generator=g).to(model.weight.dtype)


def run(model, x):
    with torch.no_grad():
        return model(x)


# ---- drop-in: constructor, parameters, RNG ----------------------------------------------


def test_same_parameters_and_rng_as_reference():
    ref, new = seeded_pair(42, [64, 48, SCALE], ModelNewColsum)
    assert list(ref.state_dict()) == list(new.state_dict()) == ["weight"]
    assert torch.equal(ref.weight, new.weight)
    assert new.scaling_factor == SCALE
    new.load_state_dict(ref.state_dict())  # strict: nothing extra, nothing missing


# ---- the cache: reused when nothing changed, refreshed on every change ------------------


def test_cache_reused_under_no_grad():
    m = make()
    x = x_for(m)
    first = run(m, x)
    for _ in range(3):
        assert torch.equal(run(m, x), first)
    assert m.colsum_refreshes == 1


def _assert_refreshed(m, x, before):
    out = run(m, x)
    assert torch.equal(out, fresh(m, x)), "stale column sum"
    assert not torch.equal(out, before)
    return out


def test_cache_inplace_update():
    m = make()
    x = x_for(m)
    before = run(m, x)
    with torch.no_grad():
        m.weight.add_(0.25)
    _assert_refreshed(m, x, before)
    # Through a view that shares the version counter.
    before = run(m, x)
    with torch.no_grad():
        m.weight[3].mul_(-2)
    _assert_refreshed(m, x, before)
    before = run(m, x)
    m.weight.detach().mul_(0.5)
    _assert_refreshed(m, x, before)
    assert m.colsum_refreshes == 4


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda p: torch.optim.SGD(p, lr=0.1),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
        lambda p: torch.optim.Adam(p, lr=0.01, foreach=False),
        lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
        lambda p: torch.optim.AdamW(p, lr=0.01, fused=True),
    ],
    ids=["sgd", "sgd-foreach", "adam", "adam-foreach", "adamw-fused"],
)
def test_cache_optimizer_step(make_opt):
    m = make()
    x = x_for(m)
    opt = make_opt(m.parameters())
    before = run(m, x)
    for _ in range(2):
        opt.zero_grad()
        m(x).square().mean().backward()  # the training forward: gradients reach the weight
        opt.step()
        before = _assert_refreshed(m, x, before)


def test_cache_load_state_dict():
    m, other = make(seed=0), make(seed=1)
    x = x_for(m)
    before = run(m, x)
    m.load_state_dict(other.state_dict())
    out = _assert_refreshed(m, x, before)
    assert torch.equal(out, run(other, x))
    # assign=True replaces the Parameter instead of copying into it.
    third = make(seed=2)
    m.load_state_dict(third.state_dict(), assign=True)
    assert torch.equal(run(m, x), run(third, x))


def test_cache_to_dtype_round_trip():
    m = make()
    x = x_for(m)
    before = run(m, x)
    m.half()
    xh = x.half()
    assert run(m, xh).dtype == torch.float16
    assert torch.equal(run(m, xh), fresh(m, xh))
    m.float()  # the weight is now the fp16-rounded one: its column sum differs
    _assert_refreshed(m, x, before)
    m.to(torch.float64)
    assert torch.equal(run(m, x.double()), fresh(m, x.double()))


def test_cache_replaced_parameter():
    m = make()
    x = x_for(m)
    before = run(m, x)
    m.weight = nn.Parameter(torch.randn_like(m.weight))
    _assert_refreshed(m, x, before)
    # Same shape, same version 0, possibly the same address as a freed weight.
    for _ in range(3):
        before = run(m, x)
        m.weight = nn.Parameter(m.weight.detach() * 1.5)
        _assert_refreshed(m, x, before)


def test_cache_data_assignment():
    m = make()
    x = x_for(m)
    before = run(m, x)
    m.weight.data = m.weight.detach() + 1  # set_data: same Parameter, same version, new storage
    _assert_refreshed(m, x, before)


def test_cache_data_inplace_needs_invalidate():
    """The documented blind spot: `.data` has its own version counter."""
    m = make()
    x = x_for(m)
    before = run(m, x)
    m.weight.data.add_(1)
    m.invalidate_colsum()
    _assert_refreshed(m, x, before)


def test_cache_copies_and_pickles():
    m = make()
    x = x_for(m)
    out = run(m, x)
    clone = copy.deepcopy(m)
    with torch.no_grad():
        clone.weight.add_(1)
    assert torch.equal(run(m, x), out)
    assert torch.equal(run(clone, x), fresh(clone, x))
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert torch.equal(run(loaded, x), out)


def test_inference_mode_model():
    with torch.inference_mode():
        m = make()
        x = x_for(m)
        assert torch.equal(m(x), fresh(m, x))  # inference tensors: no cache, still right


# ---- gradients ---------------------------------------------------------------------------


def test_gradcheck_ops_fp64():
    w = torch.randn(7, 11, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 11, dtype=torch.float64, requires_grad=True)
    c = torch.randn(11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(colsum, (w,))
    assert torch.autograd.gradcheck(lambda a, b: colsum_matvec(a, b, 0.75), (x, c))
    assert torch.autograd.gradcheck(lambda a, b: colsum_matvec(a, colsum(b), -1.25), (x, w))
    assert torch.autograd.gradgradcheck(lambda a, b: colsum_matvec(a, colsum(b), 0.5), (x, w))


def test_cpu_calls_take_the_modules_cpp_autograd():
    colsum(torch.randn(3, 4))  # loads the CPU module
    for op in ("kb14::colsum", "kb14::colsum_matvec"):
        lines = torch._C._dispatch_dump(op).splitlines()
        assert any(line.startswith("AutogradCPU:") and "colsum_autograd_cpu.cpp" in line for line in lines), lines


def test_gradcheck_model_fp64():
    m = make(input_size=9, hidden=6).double()
    x = torch.rand(4, 9, dtype=torch.float64, requires_grad=True)
    run(m, x.detach())  # a warm cache must not cut the graph
    assert torch.autograd.gradcheck(lambda a, w: torch.func.functional_call(m, {"weight": w}, (a,)),
                                    (x, m.weight))
    # And through the module itself: the weight's gradient matches the reference's.
    torch.manual_seed(3)
    ref = reference.Model(9, 6, SCALE).double()
    ref.load_state_dict(m.state_dict())
    g = torch.randn(4, 1, dtype=torch.float64)
    m(x).backward(g)
    gx = x.grad.clone()
    x.grad = None
    ref(x).backward(g)
    torch.testing.assert_close(m.weight.grad, ref.weight.grad)
    torch.testing.assert_close(gx, x.grad)


def test_grad_only_wrt_x_uses_cache():
    m = make()
    m.weight.requires_grad_(False)
    x = x_for(m).requires_grad_()
    m(x).sum().backward()
    m(x).sum().backward()
    assert m.colsum_refreshes == 1
    torch.testing.assert_close(x.grad, 2 * (colsum(m.weight) * 0.75).float().expand_as(x))


# ---- accuracy ----------------------------------------------------------------------------


def test_accuracy_vs_fp64_oracle_beats_reference():
    b, i, h = 64, 512, 4096
    torch.manual_seed(42)
    ref = reference.Model(i, h, SCALE)
    torch.manual_seed(42)
    new = ModelNewColsum(i, h, SCALE)
    errs_ref, errs_new, errs_round = [], [], []
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.rand(b, i)
        truth = colsum_matvec_reference(x, ref.weight.detach(), SCALE / 2)
        with torch.no_grad():
            errs_ref.append(rms(ref(x) - truth))
            errs_new.append(rms(new(x) - truth))
        errs_round.append(rms(truth.float() - truth))  # the floor: the truth rounded to fp32
    ref_rms, new_rms, floor = (sum(e) / len(e) for e in (errs_ref, errs_new, errs_round))
    assert new_rms < ref_rms / 5, (new_rms, ref_rms)
    assert new_rms < 1.5 * floor, (new_rms, floor)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_match_oracle_every_dtype(dtype):
    torch.manual_seed(0)
    w = torch.randn(700, 300).to(dtype)
    x = torch.rand(37, 300).to(dtype)
    c = colsum(w)
    assert c.dtype == torch.float64 and c.shape == (300,)
    torch.testing.assert_close(c, w.double().sum(0), rtol=1e-13, atol=1e-11)
    out = colsum_matvec(x, c, 0.75)
    assert out.shape == (37, 1) and out.dtype == dtype
    truth = colsum_matvec_reference(x, w, 0.75)
    # One rounding to the output dtype: within half an ulp (plus fp64 noise).
    torch.testing.assert_close(out.double(), truth.to(dtype).double(), rtol=tol(dtype), atol=0)


@pytest.mark.parametrize(
    "b,k",
    [(1, 1), (3, 7), (2, 40_000), (63, 20_000), (64, 33), (200, 1000), (1, 100_003)],
)
def test_matvec_shapes_and_splits(b, k):
    torch.manual_seed(b * 7 + k)
    x = torch.randn(b, k)
    c = torch.randn(k, dtype=torch.float64)
    out = colsum_matvec(x, c, 0.75)
    torch.testing.assert_close(out.double(), (x.double() @ c * 0.75).unsqueeze(1), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("h,k", [(1, 5), (513, 3), (5000, 1030), (40_000, 2), (3, 1)])
def test_colsum_shapes_and_row_blocks(h, k):
    torch.manual_seed(h + k)
    w = torch.randn(h, k)
    torch.testing.assert_close(colsum(w), w.double().sum(0), rtol=1e-12, atol=1e-10)


def test_layouts():
    torch.manual_seed(0)
    base = torch.randn(300, 400)
    for name, w in {"transposed": base.t(), "strided": base[:, ::3], "offset": base[5:, 1:],
                    "expanded": base[:1].expand(50, -1)}.items():
        torch.testing.assert_close(colsum(w), w.double().sum(0), rtol=1e-12, atol=1e-10, msg=name)
        c = torch.randn(w.shape[1], dtype=torch.float64)
        torch.testing.assert_close(colsum_matvec(w, c, 2.0).double(), (w.double() @ c * 2).unsqueeze(1),
                                   rtol=1e-6, atol=1e-9, msg=name)
    c = torch.randn(800, dtype=torch.float64)[::2]  # a strided colsum
    x = torch.randn(4, 400)
    torch.testing.assert_close(colsum_matvec(x, c, 1.0).double(), (x.double() @ c).unsqueeze(1), rtol=1e-6, atol=0)


def test_empty():
    assert colsum(torch.randn(0, 5)).eq(0).all() and colsum(torch.randn(4, 0)).shape == (0,)
    assert colsum_matvec(torch.randn(0, 5), torch.randn(5, dtype=torch.float64), 1.0).shape == (0, 1)
    assert colsum_matvec(torch.randn(3, 0), torch.randn(0, dtype=torch.float64), 1.0).eq(0).all()


def test_deterministic_across_thread_counts():
    torch.manual_seed(0)
    w, x = torch.randn(3000, 700), torch.randn(8, 40_000)
    c = torch.randn(40_000, dtype=torch.float64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = (colsum(w), colsum_matvec(x, c, 0.75))
        torch.set_num_threads(max(2, threads))
        many = (colsum(w), colsum_matvec(x, c, 0.75))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], many[0]) and torch.equal(one[1], many[1])


# ---- op contract ------------------------------------------------------------------------


def test_opcheck():
    w = torch.randn(33, 17, requires_grad=True)
    torch.library.opcheck(COLSUM, (w,))
    torch.library.opcheck(COLSUM, (torch.randn(5, 8, dtype=torch.float64, requires_grad=True),))
    x = torch.randn(9, 17, requires_grad=True)
    c = torch.randn(17, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(MATVEC, (x, c, 0.75))
    torch.library.opcheck(MATVEC, (torch.randn(3, 17, dtype=torch.bfloat16), c.detach(), -2.0))


def test_compile_fullgraph_model():
    m = make()
    x = x_for(m)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(x), run(m, x))


def test_bad_inputs():
    c = torch.randn(5, dtype=torch.float64)
    with pytest.raises(ValueError, match="must be 2-D"):
        colsum(torch.randn(5))
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        colsum(torch.ones(3, 5, dtype=torch.int32))
    with pytest.raises(ValueError, match="x must be 2-D"):
        colsum_matvec(torch.randn(5), c, 1.0)
    with pytest.raises(ValueError, match="colsum must be 1-D"):
        colsum_matvec(torch.randn(2, 5), c[None], 1.0)
    with pytest.raises(TypeError, match="colsum must be float64"):
        colsum_matvec(torch.randn(2, 5), c.float(), 1.0)
    with pytest.raises(ValueError, match="x has 4 columns but colsum has 5"):
        colsum_matvec(torch.randn(2, 4), c, 1.0)
    with pytest.raises(TypeError, match="x must be float32"):
        colsum_matvec(torch.ones(2, 5, dtype=torch.int64), c, 1.0)
    with pytest.raises(TypeError, match="scale must be"):
        colsum_matvec(torch.randn(2, 5), c, torch.tensor(1.0))
    with pytest.raises(TypeError, match="torch.Tensor"):
        colsum([[1.0]])
    m = make()
    with pytest.raises(ValueError, match="2-D tensor"):
        m(torch.randn(3, 5))
    with pytest.raises(ValueError, match="float64"):
        m(torch.randn(3, 96, dtype=torch.float64))


# ---- GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1024, 8192, 8192), (1, 1, 1), (3, 7, 5), (2, 300_001, 9), (37, 1001, 333),
                                   (5000, 64, 100),
                                   # the resident kernel: 2 or 4 vectors per thread, the last partly
                                   # filled, rows not a multiple of its grid, odd and even rows per block
                                   (1000, 4104, 64), (3001, 8184, 32), (600, 2052, 16),
                                   # and with fewer rows than its grid, a block per row
                                   (1, 8192, 4), (8, 8192, 16), (130, 4100, 16)])
def test_gpu_matches_oracle_and_cpu(dtype, shape):
    b, k, h = shape
    gen = torch.Generator(device="cuda").manual_seed(b + k + h)
    w = torch.randn(h, k, device="cuda", generator=gen).to(dtype)
    x = torch.rand(b, k, device="cuda", generator=gen).to(dtype)
    c = colsum(w)
    assert c.device.type == "cuda" and c.dtype == torch.float64
    torch.testing.assert_close(c, w.double().sum(0), rtol=1e-12, atol=1e-9)
    out = colsum_matvec(x, c, 0.75)
    truth = colsum_matvec_reference(x, w, 0.75)
    assert out.shape == (b, 1) and out.dtype == dtype
    cpu = colsum_matvec(x.cpu(), colsum(w.cpu()), 0.75)
    if dtype == torch.float64:
        # fp64 against the fp64 oracle: both carry fp64 summation error, which a row whose
        # terms cancel makes large relative to its result; bound it by the sums' forward
        # error bound instead, 2 (k + h) eps sum_k |x_k| sum_j |w_jk| |scale|.
        bound = 2 * (k + h) * torch.finfo(torch.float64).eps * (x.abs() @ w.abs().sum(0) * 0.75).unsqueeze(1)
        assert ((out - truth).abs() <= bound).all() and ((out.cpu() - cpu).abs() <= bound.cpu()).all()
        return
    torch.testing.assert_close(out.double(), truth.to(dtype).double(), rtol=tol(dtype), atol=0)
    torch.testing.assert_close(out.cpu().double(), cpu.double(), rtol=tol(dtype), atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [8, 300, 1024])
def test_gpu_matvec_reads_what_the_kernel_before_wrote(rows):
    # The fp32 resident kernel's first blocks ask L2 for their rows before they wait for the
    # kernel before them; here that kernel (the tail, which lets its dependents launch
    # early) is still writing those rows.
    gen = torch.Generator(device="cuda").manual_seed(rows)
    a_in = torch.randn(rows * 8192, 2, device="cuda", generator=gen)
    c = torch.randn(8192, device="cuda", dtype=torch.float64, generator=gen)
    written = div_sum_scale_reference(a_in, 2, 1.5).view(rows, 8192)
    torch.cuda.synchronize()
    expected = colsum_matvec(written, c, 0.75)
    torch.cuda.synchronize()
    torch.testing.assert_close(expected.double(), (written.double() @ c * 0.75).unsqueeze(1), rtol=1e-6, atol=0)
    for _ in range(3):
        assert torch.equal(colsum_matvec(div_sum_scale(a_in, 2, 1.5).view(rows, 8192), c, 0.75), expected)


@pytest.mark.gpu
def test_gpu_layouts_and_misalignment():
    gen = torch.Generator(device="cuda").manual_seed(0)
    base = torch.randn(513, 4101, device="cuda", generator=gen)
    padded = torch.randn(700, 8200, device="cuda", generator=gen)[:, :8192]  # aligned rows, stride != cols
    for name, t in {"offset 1": base[:, 1:], "offset 3 rows": base[3:, 3:4003], "strided": base[:, ::2],
                    "transposed": base[:, :700].t(), "padded rows": padded}.items():
        torch.testing.assert_close(colsum(t), t.double().sum(0), rtol=1e-12, atol=1e-9, msg=name)
        c = torch.randn(t.shape[1], device="cuda", dtype=torch.float64, generator=gen)
        torch.testing.assert_close(colsum_matvec(t, c, 0.75).double(), (t.double() @ c * 0.75).unsqueeze(1),
                                   rtol=1e-6, atol=1e-9, msg=name)


@pytest.mark.gpu
def test_gpu_deterministic_and_no_host_sync():
    w = torch.randn(8192, 8192, device="cuda")
    x = torch.rand(1024, 8192, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        c1 = colsum(w)
        o1 = colsum_matvec(x, c1, 0.75)
        c2 = colsum(w)
        o2 = colsum_matvec(x, c2, 0.75)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(c1, c2) and torch.equal(o1, o2)


@pytest.mark.gpu
def test_gpu_model_cache_follows_device():
    m = make()
    x = x_for(m)
    cpu_out = run(m, x)
    m.cuda()
    gpu_out = run(m, x.cuda())
    assert gpu_out.device.type == "cuda"
    torch.testing.assert_close(gpu_out.cpu(), cpu_out, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        m.weight.add_(1)
    assert torch.equal(run(m, x.cuda()), fresh(m, x.cuda()))
    m.cpu()
    assert torch.equal(run(m, x), fresh(m, x))


@pytest.mark.gpu
def test_gpu_opcheck():
    w = torch.randn(33, 17, device="cuda", requires_grad=True)
    torch.library.opcheck(COLSUM, (w,))
    x = torch.randn(9, 17, device="cuda", requires_grad=True)
    c = torch.randn(17, device="cuda", dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(MATVEC, (x, c, 0.75))


def test_bench_colsum_row(tmp_path):
    import bench

    path = tmp_path / "out.json"
    rc = bench.main(["--device", "cpu", "--batch", "8", "--input", "32", "--hidden", "64", "--kb-trials", "2",
                     "--kb-warmup", "1", "--repeats", "2", "--no-compile", "--fast-ceilings", "--colsum",
                     "--json", str(path)])
    assert rc == 0
    import json

    rows = {r["name"]: r for r in json.loads(path.read_text())["rows"]}
    row = rows["ModelNewColsum"]
    assert row["error"] is None and row["time_ms"] > 0 and row["speedup_vs_eager"] > 0
    assert row["check"]["allclose_1e-2"] is True and row["check"]["ok"] is True
    assert rows["ModelNew"]["check"]["bitwise_equal"] is True
