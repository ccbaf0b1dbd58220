"""ModelNewHybrid: exact where it falls back, its error model, its selection, and on CUDA
its ops' bits against cuBLAS, graph capture and compile, gradients."""

import math

import pytest
import torch

import kernels
import modelnew
import reference
from kernels import hybrid_ops


def _near_zero(x, c):
    """x with each row's component along c taken out: every row's exact answer near zero."""
    xd = x.double()
    return (xd - (xd @ c / (c @ c)).unsqueeze(1) * c.unsqueeze(0)).float()


def _pair(inp, hidden, scale=1.5, device="cpu"):
    torch.manual_seed(42)
    ref = reference.Model(inp, hidden, scale).to(device)
    torch.manual_seed(42)
    hyb = modelnew.ModelNewHybrid(inp, hidden, scale).to(device)
    return ref, hyb


# ---- CPU: the fallback is ModelNew, bit for bit; the model's structure is the reference's ----


@pytest.mark.parametrize("batch,inp,hidden", [(8, 64, 32), (3, 100, 7), (1, 257, 129)])
def test_cpu_is_the_reference_bit_for_bit(batch, inp, hidden):
    ref, hyb = _pair(inp, hidden)
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.rand(batch, inp)
        with torch.no_grad():
            assert torch.equal(hyb(x), ref(x))


def test_same_parameters_and_state_dict_as_the_reference():
    ref, hyb = _pair(48, 16)
    assert list(hyb.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert torch.equal(hyb.weight, ref.weight)


def test_bad_input_names_the_problem():
    _, hyb = _pair(16, 8)
    with pytest.raises(ValueError, match="2-D tensor"):
        hyb(torch.rand(4, 15))
    with pytest.raises(ValueError, match="float64"):
        hyb(torch.rand(4, 16, dtype=torch.float64))


def test_hybrid_ops_have_no_cpu_kernel():
    stats = hybrid_ops.weight_statistics(torch.randn(8, 16))
    # The message names the devices the op has (CUDA), not those of the library's other ops.
    for call in (lambda: hybrid_ops.hybrid_rows(torch.rand(4, 16), stats, 0.75, 8),
                 lambda: hybrid_ops.rows_gemm(torch.rand(4, 16), torch.rand(8, 16), torch.arange(4, dtype=torch.int32),
                                              torch.tensor([2], dtype=torch.int32)),
                 lambda: hybrid_ops.hybrid_forward(torch.rand(4, 16), torch.rand(8, 16), stats, 2, 1.5)):
        with pytest.raises(NotImplementedError, match=r"no kernel for cpu tensors \(CUDA tensors only\)"):
            call()


# ---- the error model (CPU, on an emulated single-chain GEMM) -----------------------------


def _chain_gemm(x, w):
    # One fp32 FMA chain per output, k ascending: the product is exact in fp64, the sum is
    # rounded to fp64 and then fp32 (a double rounding that matters only at rare ties).
    acc = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float32)
    xd, wd = x.double(), w.double()
    for k in range(x.shape[1]):
        acc = (acc.double() + xd[:, k : k + 1] * wd[:, k].unsqueeze(0)).float()
    return acc


@pytest.mark.parametrize("kind", ["rand", "randn", "rand*1e3", "rand*1e-3"])
def test_predicted_sigma_matches_the_measured_error(kind):
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(256, 512, generator=gen)
    x = {"rand": lambda: torch.rand(256, 512, generator=gen),
         "randn": lambda: torch.randn(256, 512, generator=gen),
         "rand*1e3": lambda: torch.rand(256, 512, generator=gen) * 1e3,
         "rand*1e-3": lambda: torch.rand(256, 512, generator=gen) * 1e-3}[kind]()
    ref = (torch.sum(_chain_gemm(x, w) / 2, 1) * 1.5).double()
    exact = 0.75 * (x.double() @ w.double().sum(0))
    sigma = hybrid_ops.predicted_sigma(x, hybrid_ops.weight_statistics(w), 0.75, 256)
    ratio = (ref - exact) / sigma
    rms = ratio.pow(2).mean().sqrt().item()
    # The model is the error's standard deviation: rms near 1 (256 rows: +-10%), never far above.
    assert 0.8 < rms < 1.15, rms
    assert ratio.abs().max().item() < 5


def test_weight_statistics_in_chunks_equal_one_pass():
    w = torch.randn(37, 23, dtype=torch.float64)
    one = hybrid_ops.weight_statistics(w, chunk_rows=1000)
    chunked = hybrid_ops.weight_statistics(w, chunk_rows=5)
    assert torch.allclose(one.vectors, chunked.vectors, rtol=1e-6)  # the model's vectors are fp32-rounded
    assert torch.allclose(one.scalars, chunked.scalars, rtol=1e-12)
    # gamma = sum_k |C_k|^2 is also sum_j beta_j (both are 1^T M 1), up to beta's fp32 rounding.
    assert math.isclose(one.scalars[0].item(), one.scalars[2].item(), rel_tol=1e-6)


def test_selection_keeps_the_union_bound_within_the_budget():
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(64, 128, generator=gen)
    x = torch.rand(512, 128, generator=gen, dtype=torch.float64) * 1e3
    c = w.double().sum(0)
    x[::2] -= (x[::2] @ c / (c @ c)).unsqueeze(1) * c * 0.9999  # half the rows' answers near zero
    x = x.float()
    stats = hybrid_ops.weight_statistics(w)
    approx, exact = hybrid_ops.select_reference(x, stats, 0.75, 64)
    sigma = hybrid_ops.SIGMA_FACTOR * hybrid_ops.predicted_sigma(x, stats, 0.75, 64)
    margin = (1e-4 + 1e-4 * approx.squeeze(1).double().abs()) / (1 + 1e-4)
    risk = torch.special.erfc(margin / sigma * math.sqrt(0.5))
    kept = ~exact
    assert 0 < int(kept.sum()) < 512  # some rows each way at this size
    assert risk[kept].sum().item() <= hybrid_ops.BUDGET
    # Every exact row is riskier than every approximate row.
    assert risk[exact].min() >= risk[kept].max()


def test_tail_depth_bounds_the_additions():
    assert hybrid_ops.tail_depth(1) >= 1
    assert hybrid_ops.tail_depth(8192) >= 16  # 1024 x 8192's plan: 4 serial, 3 combine, 5 shuffles, 4 shared
    assert hybrid_ops.tail_depth(100) <= 101


# ---- CUDA -------------------------------------------------------------------------------------


@pytest.mark.gpu
# (1024, 8192, 8192), (100, 1024, 320) and (100, 32, 64), one slab: whole slabs (K % 32, N % 64) for the
# few rows' tile; the others bounds checked, (100, 1040, 320) the nearest miss (K % 16 but not % 32), and
# K = 0 (the whole-slab tile reads a first slab)
@pytest.mark.parametrize("m,k,n", [(1024, 8192, 8192), (100, 1024, 320), (100, 32, 64), (100, 1040, 320),
                                   (100, 0, 64), (300, 1000, 777), (64, 1001, 130)])
def test_rows_gemm_is_one_fma_chain_per_output(m, k, n):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(m, k, device="cuda", generator=gen)
    w = torch.randn(n, k, device="cuda", generator=gen)
    perm = torch.randperm(m, device="cuda", generator=gen).int()
    full = torch.matmul(x, w.T) if (m, k, n) == (1024, 8192, 8192) else None  # cuBLAS's single chain here
    # each tile's range and its edges: up to 192 rows, to 3/8 of the batch, past it
    for c in sorted({m, m // 2, m // 5, 1, 0} | {c for c in (179, 192, 193, 384, 385) if c <= m}, reverse=True):
        count = torch.tensor([c], device="cuda", dtype=torch.int32)
        y = hybrid_ops.rows_gemm(x, w, perm, count)
        chosen = perm[:c].long()
        if full is not None:
            assert torch.equal(y[chosen], full[chosen])
        if c:  # against the probe's single chain on sampled outputs
            pick = torch.randint(0, c, (4096,), device="cuda", generator=gen)
            r, h = chosen[pick], torch.randint(0, n, (4096,), device="cuda", generator=gen)
            assert torch.equal(y[r, h], hybrid_ops.ORDER_PROBE(x, w, r, h, 1, 1, False))
        assert bool((y[perm[c:].long()] == 0).all())


@pytest.mark.gpu
# KernelBench's shape (the gathered tail: a block row in one round of loads), 512 x 12288 (block rows that
# loop), 1000 x 8191 (block rows starting mid-vector) and 300 x 1000 (warp rows: the whole tail, then a merge)
@pytest.mark.parametrize("m,k,n", [(1024, 8192, 8192), (512, 1024, 12288), (1000, 1024, 8191), (300, 1000, 1000)])
def test_hybrid_forward_equals_its_ops_composed(m, k, n):
    gen = torch.Generator(device="cuda").manual_seed(3)
    w = torch.randn(n, k, device="cuda", generator=gen)
    stats = hybrid_ops.weight_statistics(w)
    for kind in ("rand", "near zero"):
        x = torch.rand(m, k, device="cuda", generator=gen)
        if kind == "near zero":  # every row exact
            x = _near_zero(x, stats.colsum)
        approx, exact, rows, count = hybrid_ops.hybrid_rows(x, stats, 0.75, n)
        y = hybrid_ops.rows_gemm(x, w, rows, count)
        want = torch.where(exact.unsqueeze(1), kernels.div_sum_scale(y, 2, 1.5, pdl=False), approx)
        out, mask = hybrid_ops.hybrid_forward(x, w, stats, 2, 1.5)
        assert torch.equal(mask, exact)
        assert torch.equal(out, want)
        assert int(count.item()) > 0  # the exact path ran


@pytest.mark.gpu
def test_calibration_finds_the_single_chain_at_kernelbench_shape():
    found = hybrid_ops.find_order(1024, 8192, 8192, torch.device("cuda"))
    assert found["order"] == "single chain" and found["supported"]


@pytest.mark.gpu
def test_kernel_selection_equals_the_torch_twin():
    ref, hyb = _pair(8192, 8192, device="cuda")
    stats = hyb.weight_statistics()
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.rand(1024, 8192, device="cuda")
        approx_k, exact_k, rows, count = hybrid_ops.hybrid_rows(x, stats, 0.75, 8192)
        approx_t, exact_t = hybrid_ops.select_reference(x, stats, 0.75, 8192)
        assert torch.equal(approx_k, approx_t)
        assert torch.equal(exact_k, exact_t)
        c = int(count.item())
        assert c == int(exact_k.sum())
        # filed deterministically: the rows to compute ascending, the kept ones from the end, descending
        assert torch.equal(rows[:c].long(), torch.nonzero(exact_k).squeeze(1))
        assert torch.equal(rows[c:].long().flip(0), torch.nonzero(~exact_k).squeeze(1))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["rand", "randn", "rand*1e3", "rand*1e-3", "near zero"])
def test_hybrid_passes_kernelbench_and_its_exact_rows_are_the_references(kind):
    ref, hyb = _pair(8192, 8192, device="cuda")
    c = ref.weight.detach().double().sum(0)
    for seed in range(5):
        torch.manual_seed(seed)
        x = torch.rand(1024, 8192, device="cuda")
        if kind == "randn":
            x = torch.randn(1024, 8192, device="cuda")
        elif kind == "rand*1e3":
            x = x * 1e3
        elif kind == "rand*1e-3":
            x = x * 1e-3
        elif kind == "near zero":
            x = _near_zero(x, c)
        with torch.no_grad():
            want, got = ref(x), hyb(x)
        assert torch.allclose(want, got, atol=1e-4, rtol=1e-4)
        exact = hyb.last_exact_rows
        assert torch.equal(got[exact], want[exact])
        if kind == "near zero":
            assert bool(exact.all())
        assert hyb.exactness().startswith(f"the reference's bits on {int(exact.sum())} of 1024 rows")


@pytest.mark.gpu
def test_hybrid_falls_back_where_the_order_is_not_the_single_chain():
    ref, hyb = _pair(8192, 8192, device="cuda")
    hyb(torch.rand(1024, 8192, device="cuda"))  # a hybrid forward first: the fallback must not keep its rows
    x = torch.rand(128, 8192, device="cuda")  # cuBLAS splits k at 128 rows
    with pytest.warns(UserWarning, match="ModelNew's exact path"):
        out = hyb(x)
    assert torch.equal(out, ref(x))
    assert hyb.last_exact_rows is None and hyb.exactness().startswith("the reference's bits on every row")


def test_check_reports_what_the_hybrid_says_of_its_bits():
    import check

    r = check.run_check(model="modelnew:ModelNewHybrid", trials=1, device="cpu",
                        sets={"batch_size": 4, "input_size": 64, "hidden_size": 32})
    assert r["verdict"] == "PASS", r["message"]
    assert r["candidate_says"].startswith("the reference's bits on every row (ModelNew's path")
    assert "the candidate says of its bits: the reference's bits on every row" in check.format_report(r)


@pytest.mark.gpu
def test_graph_and_compile_equal_eager():
    ref, hyb = _pair(8192, 8192, device="cuda")
    torch.manual_seed(1)
    x = torch.rand(1024, 8192, device="cuda")
    with torch.no_grad():
        eager = hyb(x)
        static = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            hyb(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = hyb(static)
        x2 = torch.rand(1024, 8192, device="cuda")
        static.copy_(x2)
        graph.replay()
        assert torch.equal(captured, hyb(x2))
        compiled = torch.compile(hyb, fullgraph=True)
        assert torch.equal(compiled(x), eager)


@pytest.mark.gpu
def test_gradients_are_as_accurate_as_the_references():
    ref, hyb = _pair(8192, 8192, device="cuda")
    x = torch.rand(1024, 8192, device="cuda")
    xh, xr = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    g = torch.randn(1024, 1, device="cuda")
    hyb(xh).backward(g)
    ref(xr).backward(g)
    # The exact gradients, in fp64: d/dx = 0.75 g W.sum(0); d/dW[h] = 0.75 g^T x for every h.
    w64 = ref.weight.detach().double()
    true_x = 0.75 * g.double() * w64.sum(0, keepdim=True)
    true_w = (0.75 * g.double().T @ x.double()).expand_as(w64)
    for ours, theirs, truth in ((xh.grad, xr.grad, true_x), (hyb.weight.grad, ref.weight.grad, true_w)):
        err_ours = (ours.double() - truth).abs().max().item()
        err_ref = (theirs.double() - truth).abs().max().item()
        assert err_ours <= 2 * err_ref + 1e-12, (err_ours, err_ref)


@pytest.mark.gpu
def test_opcheck_hybrid_ops():
    w = torch.randn(96, 200, device="cuda")
    x = torch.rand(70, 200, device="cuda")
    stats = hybrid_ops.weight_statistics(w)
    args = (x, stats.colsum, stats.model_vectors, stats.scalars, 0.75, hybrid_ops.KAPPA, hybrid_ops.tail_depth(96),
            hybrid_ops.SIGMA_FACTOR, 1e-4, 1e-4, hybrid_ops.BUDGET)
    torch.library.opcheck(hybrid_ops.HYBRID_ROWS, args)
    _, _, rows, count = hybrid_ops.HYBRID_ROWS(*args)
    torch.library.opcheck(hybrid_ops.ROWS_GEMM, (x, w, rows, count))
    torch.library.opcheck(hybrid_ops.HYBRID_FORWARD, (x, w) + args[1:4] + (2.0, 1.5) + args[5:])


@pytest.mark.gpu
def test_rows_gemm_rejects_bad_input():
    x = torch.rand(4, 8, device="cuda")
    w = torch.rand(3, 8, device="cuda")
    rows = torch.arange(4, device="cuda", dtype=torch.int32)
    count = torch.tensor([4], device="cuda", dtype=torch.int32)
    with pytest.raises(ValueError, match="columns"):
        hybrid_ops.rows_gemm(x, torch.rand(3, 9, device="cuda"), rows, count)
    with pytest.raises(TypeError, match="float32"):
        hybrid_ops.rows_gemm(x.double(), w, rows, count)
    with pytest.raises(ValueError, match="int32 vector"):
        hybrid_ops.rows_gemm(x, w, rows.long(), count)
    stats = hybrid_ops.weight_statistics(w)
    with pytest.raises(ValueError, match="columns"):
        hybrid_ops.hybrid_forward(torch.rand(4, 9, device="cuda"), w, stats, 2, 1.5)
    with pytest.raises(TypeError, match="float32"):
        hybrid_ops.hybrid_forward(x, w.double(), stats, 2, 1.5)
    with pytest.raises(ValueError, match="divisor"):
        hybrid_ops.hybrid_forward(x, w, stats, 0, 1.5)


@pytest.mark.gpu
def test_gemm_order_probe_rejects_indices_it_cannot_follow():
    x = torch.rand(4, 8, device="cuda")
    w = torch.rand(3, 8, device="cuda")
    r = torch.tensor([0, 3], device="cuda")
    h = torch.tensor([2, 0], device="cuda")
    assert hybrid_ops.ORDER_PROBE(x, w, r, h, 1, 1, False).shape == (2,)
    with pytest.raises(RuntimeError, match="on x's device"):
        hybrid_ops.ORDER_PROBE(x, w, r.cpu(), h, 1, 1, False)
    for bad_r, bad_h in ((torch.tensor([0, 4]), h), (r, torch.tensor([3, 0])), (torch.tensor([-1, 0]), h)):
        with pytest.raises(IndexError, match="outside x's 4 rows and the weight's 3"):
            hybrid_ops.ORDER_PROBE(x, w, bad_r.cuda(), bad_h.cuda(), 1, 1, False)
    torch.cuda.synchronize()  # nothing was launched with them
