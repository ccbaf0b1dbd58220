// CPU implementation of kb14::div_sum_scale and the op's registration.
//
// Bit-exactness comes from performing the same floating-point operations, on the
// same operands, in the same order as the reference:
//   y / divisor      ATen's CPU true-divide: a / float(divisor) in the tensor's type
//                    (reduced floats: float(a) / float(divisor), rounded back)
//   torch.sum(., 1)  ATen's CPU cascade sum (aten/src/ATen/native/cpu/SumKernel.cpp):
//                    vectorised accumulators, 4-way ILP, a 4-level cascade, a
//                    scalar tail, then the lanes in order; one row split across
//                    threads in two passes when there is a single output
//   * scale          ATen's CPU multiply: out * float(scale) in the tensor's type
// The vector width the cascade uses follows the CPU capability torch dispatches
// to, read at run time. The quotient is never stored: each element is divided as
// it is loaded, so y is read once.

#include "div_sum_scale.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/Version.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace kb14 {

void check_div_sum_scale_inputs(const at::Tensor& y) {
  KB14_CHECK_VALUE(y.dim() == 2, "div_sum_scale: y must be 2-D (rows, columns), got ", y.dim(),
                   "-D with shape ", y.sizes());
  const auto dt = y.scalar_type();
  KB14_CHECK_TYPE(is_float_dtype(dt), "div_sum_scale: y must be float32, float64, float16 or bfloat16, got ", dt);
  KB14_CHECK(y.layout() == at::kStrided, "div_sum_scale: y must be a dense (strided) tensor, got layout ",
              y.layout());
}

bool intermediate_is_row_major(const at::Tensor& y) {
  const int64_t rows = y.size(0), cols = y.size(1);
  if (rows <= 1 || cols <= 1) return true;  // one dimension: every layout reads the same
  if (y.stride(1) == 1 && y.stride(0) >= cols) return true;
  // Ask TensorIterator itself, on the meta device: it lays out the quotient
  // exactly as the reference's division would, without touching any data.
  auto probe = at::empty_strided(y.sizes(), y.strides(), y.options().device(at::kMeta));
  auto quotient = at::div(probe, 2.0);
  return quotient.stride(1) == 1 && quotient.stride(0) == cols;
}

at::Tensor div_sum_scale_composite(const at::Tensor& y, double divisor, double scale) {
  return at::mul(at::sum(at::div(y, divisor), {1}, /*keepdim=*/true), scale);
}

namespace {

template <typename T> struct AccType { using type = T; };
template <> struct AccType<c10::Half> { using type = float; };
template <> struct AccType<c10::BFloat16> { using type = float; };

template <typename T>
constexpr bool is_reduced_float = std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;

// The reference's CPU quotient, rounded to the tensor's dtype, then loaded as the
// accumulation type (SumKernel's CastLoadPolicy).
template <typename scalar_t>
struct CpuQuotient {
  using acc_t = typename AccType<scalar_t>::type;
  using div_t = std::conditional_t<is_reduced_float<scalar_t>, float, scalar_t>;
  div_t divisor;
  explicit CpuQuotient(double d) : divisor(static_cast<div_t>(d)) {}
  inline acc_t operator()(scalar_t a) const {
    if constexpr (is_reduced_float<scalar_t>) {
      return static_cast<float>(static_cast<scalar_t>(static_cast<float>(a) / divisor));
    } else {
      return a / divisor;
    }
  }
};

// Reads already-rounded values (the two-pass buffer).
template <typename scalar_t>
struct CpuCast {
  using acc_t = typename AccType<scalar_t>::type;
  inline acc_t operator()(scalar_t a) const { return static_cast<acc_t>(a); }
};

inline int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  return 64 - __builtin_clzll(static_cast<uint64_t>(x) - 1);
}

// One row of the reference's intermediate, read through `elem(i)` (the i-th value as
// acc_t). W accumulator lanes per vector; L elements per vector load: L == 2W for
// half and bfloat16, whose vector load converts its two halves to float and adds
// them lane-wise (verified bit for bit against torch's CPU sum).
template <typename acc_t, int W, int L, typename Elem>
struct RowCascade {
  const Elem& elem;

  inline acc_t vec_lane(int64_t v, int l) const {
    if constexpr (L == W) {
      return elem(v * L + l);
    } else {
      return elem(v * L + l) + elem(v * L + W + l);
    }
  }

  // multi_row_sum<vacc, 4>: four interleaved vector accumulators, each a 4-level
  // cascade. Vector index of (group i, accumulator k) = i * 4 + k.
  void multi_row_sum(int64_t groups, acc_t (&out)[4][W]) const {
    constexpr int levels = 4;
    const int64_t level_power = std::max<int64_t>(4, ceil_log2(groups) / levels);
    const int64_t level_step = int64_t(1) << level_power;
    const int64_t level_mask = level_step - 1;
    acc_t acc[levels][4][W];
    std::fill_n(&acc[0][0][0], levels * 4 * W, acc_t(0));

    auto add_group = [&](int64_t i) {
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 32
        for (int l = 0; l < W; ++l) acc[0][k][l] += vec_lane(i * 4 + k, l);
      }
    };

    int64_t i = 0;
    while (i + level_step <= groups) {
      for (int64_t j = 0; j < level_step; ++j, ++i) add_group(i);
      for (int j = 1; j < levels; ++j) {
        for (int k = 0; k < 4; ++k) {
          for (int l = 0; l < W; ++l) {
            acc[j][k][l] += acc[j - 1][k][l];
            acc[j - 1][k][l] = acc_t(0);
          }
        }
        if ((i & (level_mask << (j * level_power))) != 0) break;
      }
    }
    for (; i < groups; ++i) add_group(i);
    for (int j = 1; j < levels; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < W; ++l) acc[0][k][l] += acc[j][k][l];
    std::memcpy(out, acc[0], sizeof(out));
  }

  // row_sum<vacc>: the 4-way ILP split, leftovers into the first accumulator,
  // then the accumulators in order.
  void vector_row_sum(int64_t vectors, acc_t (&sum)[W]) const {
    acc_t partial[4][W];
    const int64_t groups = vectors / 4;
    multi_row_sum(groups, partial);
    for (int64_t v = groups * 4; v < vectors; ++v)
      for (int l = 0; l < W; ++l) partial[0][l] += vec_lane(v, l);
    for (int k = 1; k < 4; ++k)
      for (int l = 0; l < W; ++l) partial[0][l] += partial[k][l];
    std::memcpy(sum, partial[0], sizeof(sum));
  }

  // Scalar row_sum<acc_t>: the same ILP and cascade on single elements
  // (SumKernel's path for rows shorter than one vector).
  acc_t scalar_row_sum(int64_t n) const {
    RowCascade<acc_t, 1, 1, Elem> scalar{elem};
    acc_t sum[1];
    scalar.vector_row_sum(n, sum);
    return sum[0];
  }

  // vectorized_inner_sum for one row, or the scalar path below one vector.
  acc_t sum(int64_t n) const {
    if (n < L) return scalar_row_sum(n);
    const int64_t vectors = n / L;
    acc_t lanes[W];
    vector_row_sum(vectors, lanes);
    acc_t total = 0;
    for (int64_t i = vectors * L; i < n; ++i) total += elem(i);
    for (int l = 0; l < W; ++l) total += lanes[l];
    return total;
  }
};

template <typename acc_t, int W, int L, typename Elem>
acc_t cascade_sum(const Elem& elem, int64_t n) {
  return RowCascade<acc_t, W, L, Elem>{elem}.sum(n);
}

// `*out += value` into a zero-filled output (SumKernel's CastStoreAccumulate).
template <typename scalar_t, typename acc_t>
inline scalar_t store_accumulate(acc_t value) {
  return static_cast<scalar_t>(static_cast<acc_t>(scalar_t(0)) + value);
}

// The reference's `sum * scale` (ATen's CPU mul with a scalar operand).
template <typename scalar_t>
inline scalar_t scaled(scalar_t sum, double scale) {
  if constexpr (is_reduced_float<scalar_t>) {
    return static_cast<scalar_t>(static_cast<float>(sum) * static_cast<float>(scale));
  } else {
    return sum * static_cast<scalar_t>(scale);
  }
}

template <typename scalar_t, int W, int L, bool kContiguous>
void div_sum_scale_rows(const at::Tensor& y, double divisor, double scale, at::Tensor& out) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t rows = y.size(0), cols = y.size(1);
  const int64_t row_stride = y.stride(0), col_stride = y.stride(1);
  const scalar_t* base = y.const_data_ptr<scalar_t>();
  scalar_t* result = out.mutable_data_ptr<scalar_t>();
  const int64_t out_stride = out.stride(0);
  const CpuQuotient<scalar_t> quotient(divisor);

  auto row_elem = [&](const scalar_t* row) {
    return [row, col_stride, &quotient](int64_t i) {
      return quotient(row[kContiguous ? i : i * col_stride]);
    };
  };

  const int64_t numel = rows * cols;
  const bool serial = numel < at::internal::GRAIN_SIZE || at::get_num_threads() == 1 ||
                      at::in_parallel_region();
  if (rows == 1 && !serial) {
    // SumKernel's two-pass reduction for a single output: the row is cut into
    // min(threads, ceil(cols / GRAIN_SIZE)) equal chunks (at::parallel_for's split),
    // chunk t is summed into slot t of a buffer of the output dtype, then the buffer
    // is summed. Slots are indexed by chunk, not by the thread that ran it, so the
    // result cannot depend on which OpenMP runtime schedules the work.
    const int64_t max_threads = at::get_num_threads();
    const int64_t used = std::min(max_threads, div_up(cols, at::internal::GRAIN_SIZE));
    const int64_t chunk = div_up(cols, used);
    std::vector<scalar_t> buffer(max_threads, scalar_t(0));
    at::parallel_for(0, used, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t first = t * chunk, last = std::min(cols, first + chunk);
        if (first >= last) continue;
        const scalar_t* part_base = base + (kContiguous ? first : first * col_stride);
        const acc_t part = cascade_sum<acc_t, W, L>(row_elem(part_base), last - first);
        buffer[t] = store_accumulate<scalar_t>(part);
      }
    });
    const CpuCast<scalar_t> cast;
    const scalar_t* buf = buffer.data();
    const acc_t total = cascade_sum<acc_t, W, L>([buf, &cast](int64_t i) { return cast(buf[i]); },
                                                  max_threads);
    result[0] = scaled(store_accumulate<scalar_t>(total), scale);
    return;
  }

  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const acc_t total = cascade_sum<acc_t, W, L>(row_elem(base + r * row_stride), cols);
      result[r * out_stride] = scaled(store_accumulate<scalar_t>(total), scale);
    }
  });
}

// Bytes in one of the vectors SumKernel accumulates in; 0 where the order has not
// been verified (then the composite runs). On x86 it is 32 even on AVX512 CPUs:
// the sum kernel registers no AVX512 variant, so torch runs its AVX2 build there
// (verified bit for bit, see tests/test_cpu_exact.py).
int vector_bytes() {
  static const int bytes = [] {
    const std::string cap = at::get_cpu_capability();
    if (cap == "AVX512" || cap == "AVX2" || cap == "DEFAULT" || cap == "NO AVX") return 32;
    return 0;
  }();
  return bytes;
}

template <typename scalar_t, int VecBytes>
void dispatch_layout(const at::Tensor& y, double divisor, double scale, at::Tensor& out) {
  using acc_t = typename AccType<scalar_t>::type;
  constexpr int W = VecBytes / sizeof(acc_t);
  constexpr int L = VecBytes / sizeof(scalar_t);
  if (y.stride(1) == 1 || y.size(1) <= 1) {
    div_sum_scale_rows<scalar_t, W, L, true>(y, divisor, scale, out);
  } else {
    div_sum_scale_rows<scalar_t, W, L, false>(y, divisor, scale, out);
  }
}

at::Tensor div_sum_scale_cpu(const at::Tensor& y, double divisor, double scale) {
  check_div_sum_scale_inputs(y);
  const int bytes = vector_bytes();
  if (bytes == 0 || !intermediate_is_row_major(y)) {
    return div_sum_scale_composite(y, divisor, scale);
  }
  auto out = at::empty({y.size(0), 1}, y.options());
  if (y.size(0) == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "div_sum_scale_cpu", [&] {
    dispatch_layout<scalar_t, 32>(y, divisor, scale, out);
  });
  return out;
}

// The op's autograd, in C++ so that a call pays no Python on its way to the kernel.
// The kernel for y's device, below the autograd key:
at::Tensor div_sum_scale_below_autograd(const at::Tensor& y, double divisor, double scale) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::div_sum_scale", "")
                             .typed<at::Tensor(const at::Tensor&, double, double)>();
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(y, divisor, scale);
}

// The backward is the reference's chain rule, op for op (MulBackward, SumBackward,
// DivBackward), so the gradient has the reference's bits.
class DivSumScaleFunction : public torch::autograd::Function<DivSumScaleFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& y, double divisor,
                            double scale) {
    ctx->saved_data["sizes"] = y.sym_sizes();
    ctx->saved_data["divisor"] = divisor;
    ctx->saved_data["scale"] = scale;
    return div_sum_scale_below_autograd(y, divisor, scale);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
    const double divisor = ctx->saved_data["divisor"].toDouble();
    const double scale = ctx->saved_data["scale"].toDouble();
    at::Tensor grad_y = at::div(at::mul(grads[0], scale).expand_symint(sizes), divisor);
    return {grad_y, at::Tensor(), at::Tensor()};
  }
};

at::Tensor div_sum_scale_autograd(const at::Tensor& y, double divisor, double scale) {
  // No graph to record: straight to the kernel, without an autograd node.
  if (!(at::GradMode::is_enabled() && y.requires_grad())) return div_sum_scale_below_autograd(y, divisor, scale);
  return DivSumScaleFunction::apply(y, divisor, scale);
}

}  // namespace
}  // namespace kb14

TORCH_LIBRARY(kb14, m) {
  m.def("div_sum_scale(Tensor y, float divisor, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(kb14, Autograd, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_autograd);
}

TORCH_LIBRARY_IMPL(kb14, CPU, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_cpu);
}
