// kb14::div_sum_scale's autograd for CUDA tensors, in C++ so that a call pays no Python
// on its way to the kernel. Registered at AutogradCUDA when this module is loaded.
//
// Its own module (kernels/jit.py's tail_cuda_autograd), because torch's autograd headers
// take as long to compile as the rest of the CUDA op: on a first use it is built in the
// background after tail_cuda, and until it is loaded CUDA calls take the Python formula
// registered in kernels/ops.py at the Autograd key (the same ops, the same bits; only
// the host time differs). CPU tensors always take that formula.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/div.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace kb14 {
namespace {

// The kernel for y's device, below the autograd key:
at::Tensor div_sum_scale_below_autograd(const at::Tensor& y, double divisor, double scale, bool pdl) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::div_sum_scale", "")
                             .typed<at::Tensor(const at::Tensor&, double, double, bool)>();
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(y, divisor, scale, pdl);
}

// The backward is the reference's chain rule, op for op (MulBackward, SumBackward,
// DivBackward), so the gradient has the reference's bits.
class DivSumScaleFunction : public torch::autograd::Function<DivSumScaleFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& y, double divisor,
                            double scale, bool pdl) {
    ctx->saved_data["sizes"] = y.sym_sizes();
    ctx->saved_data["divisor"] = divisor;
    ctx->saved_data["scale"] = scale;
    return div_sum_scale_below_autograd(y, divisor, scale, pdl);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
    const double divisor = ctx->saved_data["divisor"].toDouble();
    const double scale = ctx->saved_data["scale"].toDouble();
    at::Tensor grad_y = at::div(at::mul(grads[0], scale).expand_symint(sizes), divisor);
    return {grad_y, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor div_sum_scale_autograd(const at::Tensor& y, double divisor, double scale, bool pdl) {
  // No graph to record: straight to the kernel, without an autograd node.
  if (!(at::GradMode::is_enabled() && y.requires_grad())) return div_sum_scale_below_autograd(y, divisor, scale, pdl);
  return DivSumScaleFunction::apply(y, divisor, scale, pdl);
}

}  // namespace
}  // namespace kb14

// The schema is defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, AutogradCUDA, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_autograd);
}
