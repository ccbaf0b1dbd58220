// cuBLASLt's own fp32 kernels on the gathered rows, for scripts/experiments/cublaslt_rows.py:
// every algorithm and configuration cuBLASLt accepts for y = x_rows @ W.T without split-K
// (the hybrid needs one FMA chain per output), so that the experiment can keep those whose
// bits equal torch.matmul's on the full shape and time them beside kb14::rows_gemm.
// An algorithm travels to Python as the 8 int64 words of cublasLtMatmulAlgo_t.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

namespace {

#define LT_CHECK(expr)                                                                   \
  do {                                                                                   \
    cublasStatus_t s_ = (expr);                                                          \
    TORCH_CHECK(s_ == CUBLAS_STATUS_SUCCESS, #expr " failed with status ", int(s_)); \
  } while (0)

constexpr int kWords = sizeof(cublasLtMatmulAlgo_t) / sizeof(int64_t);
static_assert(sizeof(cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t is 8 words");

cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x;
    LT_CHECK(cublasLtCreate(&x));
    return x;
  }();
  return h;
}

// y (rows, n) = x (rows, k) @ w (n, k).T, all row-major: in cuBLAS's column-major terms
// y.T (n x rows) = op_T(w as k x n) * x.T (k x rows), the "tn" kernels torch.matmul runs.
struct Problem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  Problem(int64_t rows, int64_t n, int64_t k) {
    LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LT_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, k, n, k));
    LT_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, k, rows, k));
    LT_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, n, rows, n));
  }
  ~Problem() {
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(op);
  }
  bool check(const cublasLtMatmulAlgo_t& algo, size_t* workspace) const {
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoCheck(handle(), op, a, b, c, c, &algo, &r) != CUBLAS_STATUS_SUCCESS) return false;
    *workspace = r.workspaceSize;
    return true;
  }
};

template <class T>
void set(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)));
}

template <class T>
T get(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  LT_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

template <class T>
std::vector<T> cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes));
  std::vector<T> v(bytes / sizeof(T));
  if (!v.empty()) LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes));
  return v;
}

template <class T>
T cap(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

at::Tensor pack(const std::vector<cublasLtMatmulAlgo_t>& algos) {
  auto t = at::empty({static_cast<int64_t>(algos.size()), kWords}, at::kLong);
  if (!algos.empty()) std::memcpy(t.data_ptr<int64_t>(), algos.data(), algos.size() * sizeof(cublasLtMatmulAlgo_t));
  return t;
}

cublasLtMatmulAlgo_t unpack(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kLong && t.numel() == kWords, "an algorithm is 8 int64 words on the CPU");
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, t.contiguous().data_ptr<int64_t>(), sizeof(algo));
  return algo;
}

// Every (algorithm, tile, stages, swizzle, custom option) cuBLASLt accepts for this shape with
// one K split, fp32 in and out, compute fp32 (no TF32), and no more than max_workspace bytes.
at::Tensor configurations(int64_t rows, int64_t n, int64_t k, int64_t max_workspace) {
  Problem p(rows, n, k);
  std::vector<int> ids(256);
  int found = 0;
  LT_CHECK(cublasLtMatmulAlgoGetIds(handle(), CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                    CUDA_R_32F, static_cast<int>(ids.size()), ids.data(), &found));
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < found; ++i) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(handle(), CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               ids[i], &base) != CUBLAS_STATUS_SUCCESS)
      continue;
    auto tiles = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    auto stages = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
    const int swizzle = cap<uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) ? 1 : 0;
    const int custom_max = static_cast<int>(cap<int32_t>(base, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX));
    for (uint32_t tile : tiles)
      for (uint32_t stage : stages)
        for (uint32_t sw = 0; sw <= static_cast<uint32_t>(swizzle); ++sw)
          for (uint32_t custom = 0; custom <= static_cast<uint32_t>(custom_max); ++custom) {
            cublasLtMatmulAlgo_t algo = base;
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage);
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1u);
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, sw);
            set<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom);
            size_t ws = 0;
            if (p.check(algo, &ws) && ws <= static_cast<size_t>(max_workspace)) out.push_back(algo);
          }
  }
  return pack(out);
}

// cuBLASLt's heuristic's choices for this shape, as they come (split-K included).
at::Tensor heuristic(int64_t rows, int64_t n, int64_t k, int64_t count, int64_t max_workspace) {
  Problem p(rows, n, k);
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = static_cast<uint64_t>(max_workspace);
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(count);
  int got = 0;
  const auto status = cublasLtMatmulAlgoGetHeuristic(handle(), p.op, p.a, p.b, p.c, p.c, pref, static_cast<int>(count),
                                                     results.data(), &got);
  cublasLtMatmulPreferenceDestroy(pref);
  LT_CHECK(status);
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < got; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) out.push_back(results[i].algo);
  return pack(out);
}

// (id, tile, stages, split-K, reduction, swizzle, custom option, inner shape, cluster shape,
// numerical implementation flags) of an algorithm.
at::Tensor describe(const at::Tensor& packed) {
  const auto algo = unpack(packed);
  std::vector<int64_t> d = {
      get<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),          get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
      get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),  get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
      get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
      get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), get<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
      get<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
      static_cast<int64_t>(cap<uint64_t>(algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS))};
  auto t = at::empty({static_cast<int64_t>(d.size())}, at::kLong);
  std::memcpy(t.data_ptr<int64_t>(), d.data(), d.size() * sizeof(int64_t));
  return t;
}

// y = x @ w.T by the given algorithm on the current stream (workspace: a CUDA byte tensor).
at::Tensor matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& packed, const at::Tensor& workspace) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat &&
                  x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.is_contiguous() && w.is_contiguous(),
              "matmul: x (rows, k) and w (n, k), contiguous fp32 on CUDA");
  const auto algo = unpack(packed);
  const int64_t rows = x.size(0), k = x.size(1), n = w.size(0);
  auto y = at::empty({rows, n}, x.options());
  Problem p(rows, n, k);
  size_t ws = 0;
  TORCH_CHECK(p.check(algo, &ws), "matmul: cuBLASLt refuses this algorithm for this shape");
  TORCH_CHECK(ws <= static_cast<size_t>(workspace.numel()), "matmul: the algorithm needs ", ws, " bytes of workspace");
  const float one = 1.f, zero = 0.f;
  LT_CHECK(cublasLtMatmul(handle(), p.op, &one, w.data_ptr<float>(), p.a, x.data_ptr<float>(), p.b, &zero,
                          y.data_ptr<float>(), p.c, y.data_ptr<float>(), p.c, &algo, workspace.data_ptr(), ws,
                          c10::cuda::getCurrentCUDAStream()));
  return y;
}

}  // namespace

TORCH_LIBRARY(kb14_cublaslt_rows, m) {
  m.def("configurations(int rows, int n, int k, int max_workspace) -> Tensor", &configurations);
  m.def("heuristic(int rows, int n, int k, int count, int max_workspace) -> Tensor", &heuristic);
  m.def("describe(Tensor algo) -> Tensor", &describe);
  m.def("matmul(Tensor x, Tensor w, Tensor algo, Tensor workspace) -> Tensor", &matmul);
}
