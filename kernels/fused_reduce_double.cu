// kb14::div_sum_scale's float64 kernels (fused_reduce_switch.cuh), a unit of their own beside fused_reduce.cu.
#include "fused_reduce_switch.cuh"
template cudaError_t kb14::tail::launch_typed<double>(const kb14::TailCall&, const kb14::tail::Config&,
                                                      kb14::TailScratch, void*, cudaStream_t);
