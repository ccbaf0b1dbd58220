// kb14::div_sum_scale's bfloat16 kernels (fused_reduce_switch.cuh), a unit of their own beside fused_reduce.cu.
#include "fused_reduce_switch.cuh"
template cudaError_t kb14::tail::launch_typed<__nv_bfloat16>(const kb14::TailCall&, const kb14::tail::Config&,
                                                             kb14::TailScratch, void*, cudaStream_t);
