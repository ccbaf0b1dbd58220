// The C++ autograd of kb14::colsum and kb14::colsum_matvec, registered for CPU tensors
// by colsum_autograd_cpu.cpp and for CUDA tensors by colsum_cuda.cpp (the Python formula in
// kernels/colsum_ops.py serves a call made before the device's module is loaded).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/autograd/custom_function.h>

namespace kb14 {
namespace colsum_autograd {

// Autograd in C++, so that a call pays no Python on its way to the kernel. The
// kernels for the inputs' device, below the autograd key:
inline at::Tensor colsum_below_autograd(const at::Tensor& w) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::colsum", "")
                             .typed<at::Tensor(const at::Tensor&)>();
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(w);
}

inline at::Tensor colsum_matvec_below_autograd(const at::Tensor& x, const at::Tensor& c, double scale) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::colsum_matvec", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(x, c, scale);
}

// d colsum[k] / d W[j, k] = 1: every row of W receives the same gradient.
class ColsumFunction : public torch::autograd::Function<ColsumFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& w) {
    ctx->saved_data["sizes"] = w.sym_sizes();
    ctx->saved_data["dtype"] = w.scalar_type();
    return colsum_below_autograd(w);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
    return {grads[0].to(ctx->saved_data["dtype"].toScalarType()).unsqueeze(0).expand_symint(sizes)};
  }
};

// out = scale * (x @ c): d/dx = scale * grad * c (rounded to x's dtype), d/dc = x^T (scale * grad) in fp64.
class ColsumMatvecFunction : public torch::autograd::Function<ColsumMatvecFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& c,
                            double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    // Keep only what a gradient will read: c for x's, x for c's.
    ctx->save_for_backward({c.requires_grad() ? x : at::Tensor(), x.requires_grad() ? c : at::Tensor()});
    return colsum_matvec_below_autograd(x, c, scale);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor g = at::mul(grads[0].to(at::kDouble), ctx->saved_data["scale"].toDouble());  // (batch, 1)
    at::Tensor grad_x, grad_c;
    if (ctx->needs_input_grad(0)) grad_x = at::mul(g, saved[1].unsqueeze(0)).to(ctx->saved_data["x_dtype"].toScalarType());
    if (ctx->needs_input_grad(1)) grad_c = at::matmul(saved[0].to(at::kDouble).t(), g.squeeze(1));
    return {grad_x, grad_c, at::Tensor()};
  }
};

// Without a graph to record, straight to the kernel, without an autograd node.
inline at::Tensor colsum_autograd(const at::Tensor& w) {
  if (!(at::GradMode::is_enabled() && w.requires_grad())) return colsum_below_autograd(w);
  return ColsumFunction::apply(w);
}
inline at::Tensor colsum_matvec_autograd(const at::Tensor& x, const at::Tensor& c, double scale) {
  if (!(at::GradMode::is_enabled() && (x.requires_grad() || c.requires_grad())))
    return colsum_matvec_below_autograd(x, c, scale);
  return ColsumMatvecFunction::apply(x, c, scale);
}

}  // namespace colsum_autograd
}  // namespace kb14
