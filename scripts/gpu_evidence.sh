#!/usr/bin/env bash
# The GPU evidence the README and results/kernel_notes.md cite, in order of priority, on one GPU:
#   KB14_COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_evidence.sh OUT_DIR [seconds]
# Each step writes into OUT_DIR and the folder is packed into OUT_DIR.tgz after each step, so
# that a run cut short still returns what it finished. Steps past the time budget are skipped;
# STEPS="name name ..." runs only the steps named, in that order (a name no step has is an error).
set -u
main() {
out=${1:?usage: gpu_evidence.sh OUT_DIR [seconds]}
budget=${2:-3600}
mkdir -p "$out"
start=$(date +%s)
export PYTHONUNBUFFERED=1
pack() { tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
step() {  # step NAME command...: runs it unless the budget is spent, logs to OUT_DIR/NAME.log
  local name=$1; shift
  if [ -n "$only" ] && [ "$name" != "$only" ]; then return; fi
  found=1
  if (( $(date +%s) - start > budget )); then echo "skipped $name (budget)" | tee -a "$out/skipped.txt"; return; fi
  echo "== $name"; "$@" > "$out/$name.log" 2>&1; echo "exit $?" >> "$out/$name.log"; tail -4 "$out/$name.log"; pack
}
steps() {  # every step, in the default order; `only`: run just that one
build_modules() { python3 -c "from kernels import jit; jit.build_all(devices=('cuda',))"; }
step build build_modules
# GEMM_TILES="variant ..." times only those (a short call); the default is every candidate.
step gemm_tiles python3 scripts/experiments/gemm_tiles.py --variants ${GEMM_TILES:-library-192x64x16-12x4 library-128x128x16-8x8 \
  narrow-192x64x16-12x8-fused-zero kmajor-192x64x16-12x8-4stage wideslab-192x64x16-12x4 wideslab-192x64x32-12x4 \
  wideslab-192x64x64-12x4 wideslab-192x64x64-8x4 wideslab-192x64x32-4x4 wideslab-192x64x16-12x4-serpentine \
  wideslab-192x64x16-12x4-paired wideslab-192x64x16-12x4-skewed wideslab-192x64x16-12x4-paired-skewed \
  wideslab-192x64x16-12x4-paired-skewed-serpentine} \
  --counts 0 1 96 179 192 \
  --budget 0.6 --json "$out/gemm_tiles.json" --table "$out/measurements_new.csv"
# cuBLASLt's own kernels without split-K on the gathered rows: which give torch.matmul's bits, how fast.
step cublaslt_rows python3 scripts/experiments/cublaslt_rows.py --counts 179 128 192 256 \
  --json "$out/cublaslt_rows.json" --table "$out/measurements_new.csv"
# Why the one-row tiles reach 51-54% of the FFMA peak: Nsight Compute's warp stalls and issue rate
# for the library's 12x4 tile and the 12x8 one at 179 rows, and for cuBLAS's kernel on every row (one launch
# each after warm-up).
gemm_tiles_ncu() {
  local stalls=(--launch-skip 1 --launch-count 1 --section SchedulerStats --section WarpStateStats
                --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --csv --page details)
  for v in staged-192x64x32-12x4-ahead staged-192x64x32-12x4-store-at-31; do
    ncu --kernel-name regex:rows_gemm_kernel "${stalls[@]}" --section SourceCounters \
      python3 scripts/experiments/gemm_tiles.py --variants $v --counts 179 --budget 0.05 || return 1
    # Each stall reason's cycles per issued instruction (allowed to fail: the names vary by ncu release).
    ncu --kernel-name regex:rows_gemm_kernel --launch-skip 1 --launch-count 1 --csv --page raw \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      python3 scripts/experiments/gemm_tiles.py --variants $v --counts 179 --budget 0.05 || echo "stall metrics: none"
  done
  ncu --kernel-name regex:ffma "${stalls[@]}" \
    python3 scripts/experiments/gemm_tiles.py --variants library-192x64x16-12x4 --counts 179 --budget 0.05
}
step gemm_tiles_ncu gemm_tiles_ncu
# The row statistics kernel under Nsight Compute: its issue, memory and occupancy figures.
step row_stats_ncu ncu --kernel-name regex:row_stats_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
  --csv --page details python3 scripts/experiments/row_stats.py --budget 0.05
step row_stats python3 scripts/experiments/row_stats.py --json "$out/row_stats.json" --table "$out/measurements_new.csv"
# KernelBench's timing against the GPU time: the host's launch gaps apart from the write flush's cost.
step host_gaps python3 scripts/experiments/host_gaps.py --json "$out/host_gaps.json" --table "$out/measurements_new.csv"
step hybrid_timing python3 scripts/hybrid_evidence.py --out "$out/hybrid_timing" --parts timing --table "$out/measurements_new.csv"
step hybrid python3 scripts/hybrid_evidence.py --out "$out/hybrid" --table "$out/measurements_new.csv"
# The hybrid's own tests alone (about a minute), for a short call.
step test_hybrid python3 -m pytest -q -rs tests/test_hybrid.py --results-table "$out/measurements_new.csv"
# The parts that rest on rows_gemm (pass counts over input kinds and sizes), apart, for a short call.
step hybrid_kinds python3 scripts/hybrid_evidence.py --out "$out/hybrid_kinds" --parts hybrid sizes --table "$out/measurements_new.csv"
# The whole suite (every GPU test runs here: 0 skipped expected) as four pytest processes at once on one GPU, to
# fit one 600 s call (in turn, 1800fb5 on an H100: 26 + 155 + 158 + 189 s); the modules built first, so that the
# groups load them rather than wait on each other's build lock. Each group's log apart; failed groups named.
MODEL_TESTS="tests/test_gpu.py tests/test_hybrid.py tests/test_colsum.py tests/test_export.py"
HARNESS_TESTS="tests/test_bad_input.py tests/test_bench.py tests/test_bench_problems.py tests/test_check.py
  tests/test_strict.py tests/test_problems.py tests/test_memory.py tests/test_integer_inputs.py
  tests/test_results_table.py tests/test_vs_inductor.py"
gpu_suite() {
  local names=(models library harness batch) pids=() failed="" i
  local rest="tests $(for t in $MODEL_TESTS $HARNESS_TESTS tests/test_batch.py; do echo --ignore=$t; done)"
  local groups=("$MODEL_TESTS" "$rest" "$HARNESS_TESTS" tests/test_batch.py)
  build_modules || return 1
  for i in "${!names[@]}"; do
    python3 -m pytest -v -rs --durations=10 ${groups[$i]} --results-table "$out/measurements_new.csv" \
      > "$out/gpu_suite_${names[$i]}.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!names[@]}"; do
    wait "${pids[$i]}" || failed="$failed ${names[$i]}"
    echo "${names[$i]}: $(tail -1 "$out/gpu_suite_${names[$i]}.log")"
  done
  [ -z "$failed" ] || { echo "failed:$failed"; return 1; }
}
step gpu_suite gpu_suite
step check_hybrid_1000 python3 check.py --model modelnew:ModelNewHybrid --trials 1000 --json "$out/check_hybrid_1000.json" --quiet
# The tail after its split by role (f642bc3): its speed against 39a345c's in the same process, the
# order over seven GPU sizes, the sanitizers, the plain launch behind the GEMM, the first outputs.
base_copy() {
  # TAIL_BASE: 39a345c's kernels/ and scripts/ already unpacked (a copy without git history)
  if [ -n "${TAIL_BASE:-}" ]; then rm -rf /tmp/base && cp -r "$TAIL_BASE" /tmp/base; else
    rm -rf /tmp/base && mkdir -p /tmp/base && git archive 39a345c kernels scripts | tar -x -C /tmp/base || {
      echo "39a345c is not in this copy's git history: set TAIL_BASE to its kernels/ and scripts/"; return 1; }; fi
}
# Two steps: each needs most of a 600 s device call.
tail_vs_base() { base_copy && python3 scripts/tail_variants.py --out "$out/tail_vs_base" --baseline /tmp/base --variants library; }
tail_vs_base_interleaved() {
  base_copy && python3 scripts/tail_variants.py --out "$out/tail_vs_base_interleaved" --baseline /tmp/base \
    --variants library --interleaved 400
}
step tail_vs_base tail_vs_base
step tail_vs_base_interleaved tail_vs_base_interleaved
step vs_inductor python3 scripts/vs_inductor.py --out "$out/vs_inductor"
# Behind a short GEMM (K 1024) and behind the model's (K 8192): two steps, each needs most of a device call.
step after_producer python3 scripts/experiments/after_producer.py $out/after_producer --producer-k 1024
step after_producer_8192 python3 scripts/experiments/after_producer.py $out/after_producer_8192 --producer-k 8192
step order_evidence python3 scripts/order_evidence.py --out "$out/order"
sanitize() {  # every tool even after one fails; a row per tool from its log (scripts/sanitizer_rows.py)
  local t logs=()
  for t in memcheck racecheck synccheck initcheck; do
    compute-sanitizer --tool $t --error-exitcode 1 python3 scripts/sanitize_cuda.py > "$out/sanitize_$t.log" 2>&1
    logs+=("$out/sanitize_$t.log")
  done
  python3 scripts/sanitizer_rows.py "${logs[@]}" --table "$out/measurements_new.csv"
}
step sanitize sanitize
step first_use python3 scripts/first_use.py --device cuda --runs 2 --out "$out/first_use.json" \
  --table "$out/measurements_new.csv"
step first_use_hybrid python3 scripts/first_use.py --device cuda --model ModelNewHybrid --runs 2 \
  --out "$out/first_use_hybrid.json" --table "$out/measurements_new.csv"
step export_files bash -c "python3 -m kernels.export ModelNew --dtype fp32 -o $out/kernelbench_l2_14_modelnew_fp32.py && \
  python3 -m kernels.export ModelNewHybrid --dtype fp32 -o $out/kernelbench_l2_14_modelnewhybrid_fp32.py"
step export_evidence python3 scripts/export_evidence.py "$out/kernelbench_l2_14_modelnew_fp32.py" \
  "$out/kernelbench_l2_14_modelnewhybrid_fp32.py" --trials 100 --json "$out/export_evidence.json"
cheats_batch() {  # every cheat beside its problem, strict, in batch mode
  rm -rf /tmp/cheats && mkdir -p /tmp/cheats && cp tests/problems/softmax.py tests/problems/gemm_epilogue.py /tmp/cheats/
  for f in tests/cheats/*.py; do
    p=$(sed -n 's/^PROBLEM = "\(.*\)"/\1/p' "$f")
    [ "$p" = tiny_outputs ] || cp "$f" "/tmp/cheats/${p}_$(basename "$f")"
  done
  python3 check.py --problems /tmp/cheats --strict-seed 1 --json "$out/cheats_batch.json"
}
step cheats_batch cheats_batch
step export_check bash -c "python3 check.py --model $out/kernelbench_l2_14_modelnew_fp32.py:ModelNew --json $out/export_check_modelnew.json && \
  python3 check.py --model $out/kernelbench_l2_14_modelnewhybrid_fp32.py:ModelNew --json $out/export_check_hybrid.json"
step relu_strict python3 check.py --reference tests/problems/kernelbench/19_ReLU.py:Model \
  --model tests/problems/kernelbench/19_ReLU_clamp.py --strict --strict-seed 1 --json "$out/relu.json"
step batchnorm_strict python3 check.py --reference tests/problems/kernelbench/33_BatchNorm.py:Model \
  --model tests/problems/kernelbench/33_BatchNorm_functional.py --strict --strict-seed 1 --json "$out/bn.json"
step too_big bash -c "python3 check.py --reference tests/problems/kernelbench/19_ReLU.py:Model \
  --model tests/problems/kernelbench/19_ReLU_clamp.py --set batch_size=65536; echo status \$?"
step realsize_batch python3 check.py --problems tests/problems/kernelbench --json "$out/kernelbench_batch.json"
step relu_bench python3 bench.py --reference tests/problems/kernelbench/19_ReLU.py:Model \
  --model tests/problems/kernelbench/19_ReLU_clamp.py:ModelNew --no-compile --json "$out/relu_bench.json"
step side_stream_bench python3 bench.py --reference tests/problems/softmax.py:Model --model tests/cheats/side_stream.py:ModelNew \
  --set batch_size=4096 --set dim=4096 --no-compile --json "$out/side_stream_bench.json"
}
if [ -z "${STEPS:-}" ]; then only=""; steps; fi
for only in ${STEPS:-}; do
  found=0; steps
  if [ "$found" = 0 ]; then echo "gpu_evidence.sh: no step named '$only'" >&2; pack; return 2; fi
done
pack
}
main "$@"
exit
