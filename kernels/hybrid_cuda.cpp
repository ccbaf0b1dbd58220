// The hybrid model's CUDA ops, host side: checks, outputs, the device guard, the current stream and the
// registration, around hybrid.cu's launchers (hybrid_launch.h; nvcc compiles them in parallel, without
// torch headers). They are not differentiable: modelnew.ModelNewHybrid carries its own gradient formula.
// Headers as the tail's glue (no ATen/ops/*.h, no CUDAGuard.h): torch/library.h is most of the unit's build.

#include "div_sum_scale.h"
#include "hybrid_launch.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <tuple>

namespace kb14 {
namespace hybrid_cuda {
void check_fp32_cuda_matrix(const at::Tensor& t, const char* op, const char* name) {
  KB14_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got ", t.device());
  KB14_CHECK_VALUE(t.dim() == 2, op, ": ", name, " must be 2-D, got ", t.dim(), "-D with shape ", t.sizes());
  KB14_CHECK_TYPE(t.scalar_type() == at::kFloat, op, ": ", name, " must be float32, got ", t.scalar_type());
  KB14_CHECK(t.layout() == at::kStrided, op, ": ", name, " must be a dense (strided) tensor");
}

// The operands of op's x @ weight.T: fp32 CUDA matrices on one device with the same columns.
void check_gemm_operands(const at::Tensor& x, const at::Tensor& w, const char* op) {
  check_fp32_cuda_matrix(x, op, "x");
  check_fp32_cuda_matrix(w, op, "weight");
  KB14_CHECK_VALUE(w.size(1) == x.size(1), op, ": x has ", x.size(1), " columns but the weight has ", w.size(1));
  KB14_CHECK(w.device() == x.device(), op, ": x and the weight must be on one device, got ", x.device(), " and ",
             w.device());
}

// rows_gemm's limit: the weight's rows size its grid and index as ints.
void check_weight_rows(const at::Tensor& w, const char* op) {
  KB14_CHECK_VALUE(w.size(0) <= std::numeric_limits<int32_t>::max(), op, ": too many weight rows (", w.size(0), ")");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hybrid_rows_cuda(
    const at::Tensor& x_in, const at::Tensor& colsum, const at::Tensor& vectors, const at::Tensor& scalars,
    double scale, double kappa, double tail_depth, double sigma_factor, double atol, double rtol, double budget) {
  check_fp32_cuda_matrix(x_in, "hybrid_rows", "x");
  const int64_t M = x_in.size(0), K = x_in.size(1);
  KB14_CHECK_VALUE(colsum.dim() == 1 && colsum.size(0) == K && colsum.scalar_type() == at::kDouble &&
                       colsum.is_contiguous(),
                   "hybrid_rows: colsum must be a contiguous float64 (", K, ",) tensor, got ", colsum.sizes());
  KB14_CHECK_VALUE(vectors.dim() == 2 && vectors.size(0) == 4 && vectors.size(1) == K &&
                       vectors.scalar_type() == at::kFloat && vectors.is_contiguous(),
                   "hybrid_rows: vectors must be a contiguous float32 (4, ", K, ") tensor, got ", vectors.sizes());
  KB14_CHECK_VALUE(scalars.dim() == 1 && scalars.size(0) == kScalarCount && scalars.scalar_type() == at::kDouble &&
                       scalars.is_contiguous(),
                   "hybrid_rows: scalars must be a contiguous float64 (", int(kScalarCount), ",) tensor");
  KB14_CHECK(colsum.device() == x_in.device() && vectors.device() == x_in.device() &&
                 scalars.device() == x_in.device(),
             "hybrid_rows: the weight statistics must be on x's device");
  KB14_CHECK_VALUE(M <= std::numeric_limits<int32_t>::max(), "hybrid_rows: too many rows (", M, ")");
  const c10::DeviceGuard guard(x_in.device());
  const at::Tensor x = x_in.stride(1) == 1 ? x_in : x_in.contiguous();
  const auto opts = x.options();
  at::Tensor approx = empty_tensor({M, 1}, opts);
  at::Tensor exact = empty_tensor({M}, opts.dtype(at::kBool));
  at::Tensor rows = empty_tensor({M}, opts.dtype(at::kInt));
  at::Tensor counts = empty_tensor({2}, opts.dtype(at::kInt));
  at::Tensor count = counts.narrow(0, 0, 1);
  if (M == 0) return {approx, exact, rows, count.zero_()};
  at::Tensor z = empty_tensor({2, M}, opts.dtype(at::kDouble));  // z, then each row's risk
  const StatsArgs s{x.const_data_ptr<float>(), x.stride(0), K, colsum.const_data_ptr<double>(),
                    vectors.const_data_ptr<float>(), scalars.const_data_ptr<double>(), scale, kappa, tail_depth,
                    sigma_factor, atol, rtol, approx.mutable_data_ptr<float>(), z.mutable_data_ptr<double>(),
                    z.mutable_data_ptr<double>() + M, counts.mutable_data_ptr<int32_t>()};
  C10_CUDA_CHECK(launch_hybrid_rows(s, M, budget, exact.mutable_data_ptr<bool>(), rows.mutable_data_ptr<int32_t>(),
                                    c10::cuda::getCurrentCUDAStream()));
  return {approx, exact, rows, count};
}

void check_rows_gemm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count) {
  check_gemm_operands(x, w, "rows_gemm");
  const int64_t M = x.size(0);
  KB14_CHECK_VALUE(rows.dim() == 1 && rows.size(0) == M && rows.scalar_type() == at::kInt,
                   "rows_gemm: rows must be an int32 vector of x's ", M, " rows, got ", rows.sizes());
  KB14_CHECK_VALUE(count.numel() == 1 && count.scalar_type() == at::kInt, "rows_gemm: count must be one int32");
  KB14_CHECK(rows.device() == x.device() && count.device() == x.device(),
             "rows_gemm: x, rows and count must be on one device");
  check_weight_rows(w, "rows_gemm");
}

// rows_gemm into y (M, N, fresh, contiguous); zero_others: zeros in the rows not gathered.
void rows_gemm_into(const at::Tensor& y, const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& rows,
                    const at::Tensor& count, bool zero_others) {
  const at::Tensor x = x_in.stride(1) == 1 ? x_in : x_in.contiguous();
  const at::Tensor w = w_in.stride(1) == 1 ? w_in : w_in.contiguous();
  const at::Tensor r = rows.is_contiguous() ? rows : rows.contiguous();
  const GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
                   r.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), x.size(0), w.size(0), x.size(1),
                   x.stride(0), w.stride(0), 0, 0, zero_others};  // the counts' ranges: the launcher's
  C10_CUDA_CHECK(launch_rows_gemm(a, x.get_device(), c10::cuda::getCurrentCUDAStream()));
}

at::Tensor rows_gemm_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count) {
  check_rows_gemm(x, w, rows, count);
  const c10::DeviceGuard guard(x.device());
  at::Tensor y = empty_tensor({x.size(0), w.size(0)}, x.options());
  rows_gemm_into(y, x, w, rows, count, true);
  return y;
}

// kb14::hybrid_forward: hybrid_rows, rows_gemm and the exact rows' tail in one host call. Plans the gathered
// tail does not take run whole_tail (kb14::div_sum_scale: the op's module and an exported file reach it apart).
std::tuple<at::Tensor, at::Tensor> hybrid_forward_cuda(const at::Tensor& x_in, const at::Tensor& w,
                                                       const at::Tensor& colsum, const at::Tensor& vectors,
                                                       const at::Tensor& scalars, double divisor, double scaling_factor,
                                                       double kappa, double tail_depth, double sigma_factor,
                                                       double atol, double rtol, double budget, WholeTail whole_tail) {
  check_gemm_operands(x_in, w, "hybrid_forward");  // before hybrid_rows launches anything
  check_weight_rows(w, "hybrid_forward");
  KB14_CHECK_VALUE(divisor != 0, "hybrid_forward: the divisor must not be zero");
  const at::Tensor x = x_in.stride(1) == 1 ? x_in : x_in.contiguous();  // once, for hybrid_rows and the GEMM
  auto [approx, exact, rows, count] = hybrid_rows_cuda(x, colsum, vectors, scalars, scaling_factor / divisor, kappa,
                                                       tail_depth, sigma_factor, atol, rtol, budget);
  const int64_t M = x.size(0), N = w.size(0);
  if (M == 0) return {approx, exact};
  const c10::DeviceGuard guard(x.device());
  const at::Tensor y = empty_tensor({M, N}, x.options());
  tail::Config plan;
  bool gathered = false;
  C10_CUDA_CHECK(gathered_tail_plan(M, N, y.stride(0), y.const_data_ptr<float>(), divisor, x.get_device(), &plan,
                                    &gathered));
  rows_gemm_into(y, x, w, rows, count, !gathered);  // the gathered tail reads no other row
  if (gathered) {
    C10_CUDA_CHECK(launch_gathered_tail(plan, y.const_data_ptr<float>(), M, N, y.stride(0),
                                        approx.mutable_data_ptr<float>(), approx.stride(0), divisor, scaling_factor,
                                        rows.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(),
                                        c10::cuda::getCurrentCUDAStream()));
    return {approx, exact};
  }
  return {whole_tail(y, divisor, scaling_factor, false).where(exact.unsqueeze(1), approx), exact};
}

at::Tensor gemm_order_probe_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& r,
                                 const at::Tensor& h, int64_t chains, int64_t tile, bool tree) {
  check_gemm_operands(x, w, "gemm_order_probe");
  KB14_CHECK_VALUE(x.stride(1) == 1 && w.stride(1) == 1, "gemm_order_probe: rows must be contiguous");
  KB14_CHECK_VALUE(chains >= 1 && chains <= kMaxChains && tile >= 1, "gemm_order_probe: 1 to ", kMaxChains,
                   " chains of tiles of at least one element");
  KB14_CHECK_VALUE(r.scalar_type() == at::kLong && h.scalar_type() == at::kLong && r.numel() == h.numel() &&
                       r.is_contiguous() && h.is_contiguous(),
                   "gemm_order_probe: r and h must be contiguous int64 vectors of one length");
  KB14_CHECK(r.device() == x.device() && h.device() == x.device(), "gemm_order_probe: r and h must be on x's device, "
             "got ", r.device(), " and ", h.device(), " for ", x.device());
  const c10::DeviceGuard guard(x.device());
  // The kernel follows every index: each is checked on a host copy (the probe runs at calibration, once a GPU).
  const at::Tensor r_host = r.cpu(), h_host = h.cpu();
  const int64_t* rs = r_host.const_data_ptr<int64_t>();
  const int64_t* hs = h_host.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < r.numel(); ++i) {
    KB14_CHECK_INDEX(rs[i] >= 0 && rs[i] < x.size(0) && hs[i] >= 0 && hs[i] < w.size(0), "gemm_order_probe: sample ",
                     i, " is (", rs[i], ", ", hs[i], "), outside x's ", x.size(0), " rows and the weight's ", w.size(0));
  }
  at::Tensor out = empty_tensor({r.numel()}, x.options());
  C10_CUDA_CHECK(launch_gemm_order_probe(x.const_data_ptr<float>(), w.const_data_ptr<float>(), x.size(1), x.stride(0),
                                         w.stride(0), r.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>(),
                                         r.numel(), static_cast<int>(chains), tile, tree, out.mutable_data_ptr<float>(),
                                         c10::cuda::getCurrentCUDAStream()));
  return out;
}

// The tail's op through the dispatcher: its kernels are another module's.
at::Tensor dispatched_div_sum_scale(const at::Tensor& y, double divisor, double scale, bool pdl) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::div_sum_scale", "")
                             .typed<at::Tensor(const at::Tensor&, double, double, bool)>();
  return op.call(y, divisor, scale, pdl);
}

std::tuple<at::Tensor, at::Tensor> hybrid_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& colsum,
                                                  const at::Tensor& vectors, const at::Tensor& scalars, double divisor,
                                                  double scaling_factor, double kappa, double tail_depth,
                                                  double sigma_factor, double atol, double rtol, double budget) {
  return hybrid_forward_cuda(x, w, colsum, vectors, scalars, divisor, scaling_factor, kappa, tail_depth, sigma_factor,
                             atol, rtol, budget, &dispatched_div_sum_scale);
}
}  // namespace hybrid_cuda
}  // namespace kb14

// The schemas are defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("hybrid_rows", &kb14::hybrid_cuda::hybrid_rows_cuda);
  m.impl("rows_gemm", &kb14::hybrid_cuda::rows_gemm_cuda);
  m.impl("hybrid_forward", &kb14::hybrid_cuda::hybrid_forward);
  m.impl("gemm_order_probe", &kb14::hybrid_cuda::gemm_order_probe_cuda);
}
