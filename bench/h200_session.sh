#!/usr/bin/env bash
# The device runs of one session, batched (bash bench/h200_session.sh STEP... ; logs and JSON to $OUT).
#   gemm    FP8 GEMM kernel: bit check against refmodel.gemm and the bench against torch._scaled_mm
#   dense   GPU fuzz engine, dense forms (RS, chains): gpu tests, the port bench, bench_fuzz
#   sparse  GPU fuzz engine, sparse forms: gpu tests and bench
#   layout  GPU fuzz engine, layout family: gpu tests and bench
#   profile ncu of the precise GEMM configs (PROFILE="cfg ..."): tensor-pipe utilisation, stalls; and of the port
#   record  the device_model digest fixtures (jobs, sparse, layout) -> $OUT/device_model.tar
#   gemmfx  the FP8 GEMM kernel's fixtures (python -m gpu.record.gemm --out) -> $OUT/gemm_fixtures.tar, and
#           bench/ftz_probe.py (cupy's compile path vs wgref's on float32 subnormal results)
#   stalls  ncu source counters (per-SASS-instruction warp stall samples) of the configs in STALLS at N (default 8192),
#           and the bench of the configs in SWEEP (stage sensitivity), no bit check
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
for step in "$@"; do
  echo "=== $step $(date -u +%T)"
  case $step in
    gemm)
      # the precise configs checked bit for bit and benched (the bench adds the fast default, promote=0)
      PRECISE=("" "scales=global" "xtile=1" "bn=192" "bn=192,scales=global" "bn=192,xtile=1" "bn=192,xtile=1,scales=global" "partials=1,scales=global" "cluster=2")
      timeout 280 python -m pytest -q -m gpu --require-gpu tests/test_gemm_kernel.py 2>&1 | tail -30 | tee $OUT/gemm_tests.txt
      timeout 150 python -m gpu.record.gemm --check-only --configs "${PRECISE[@]}" 2>&1 | tee $OUT/gemm_check.txt | tail -6
      timeout 160 python bench/bench_gemm_kernel.py --configs "${PRECISE[@]}" "promote=0" "promote=0,cluster=2" --check \
        --json $OUT/gemm_kernel.json 2>&1 | tee $OUT/gemm_bench.txt | tail -34 ;;
    dense)
      timeout 240 python -m pytest -q -m gpu --require-gpu tests/test_fuzz_device.py tests/test_device_model.py 2>&1 | tail -8 | tee $OUT/dense_tests.txt
      timeout 120 python bench/bench_port.py --json $OUT/port.json 2>&1 | tail -8 | tee $OUT/port.txt
      timeout 200 python bench/bench_fuzz.py --engine gpu --seconds 3 --json $OUT/fuzz_gpu.json 2>&1 | tail -20 | tee $OUT/fuzz_gpu.txt ;;
    sparse)
      timeout 200 python -m pytest -q -m gpu --require-gpu tests/test_gpu_sparse.py -k "device_sparse or host or parses or refuses" 2>&1 | tail -6 | tee $OUT/sparse_tests.txt
      timeout 200 python bench/bench_sparse_gpu.py --seconds 4 --cpu-seconds 3 --json $OUT/sparse_gpu.json 2>&1 | tail -14 | tee $OUT/sparse_gpu.txt
      timeout 120 python bench/bench_sparse_gpu.py --seconds 4 --cpu-seconds 1 --model-kernel chain --json $OUT/sparse_gpu_chain.json 2>&1 | tail -14 | tee $OUT/sparse_gpu_chain.txt ;;
    layout)
      timeout 200 python -m pytest -q -m gpu --require-gpu tests/test_gpu_layout.py 2>&1 | tail -4 | tee $OUT/layout_tests.txt
      timeout 200 python bench/bench_layout_gpu.py --seconds 2 --cpu-seconds 2 --json $OUT/layout_gpu.json 2>&1 | tail -20 | tee $OUT/layout_gpu.txt
      timeout 150 python bench/bench_layout_gpu.py --seconds 2 --cpu-seconds 1 --model-kernel chain --json $OUT/layout_gpu_chain.json 2>&1 | tail -20 | tee $OUT/layout_gpu_chain.txt ;;
    profile)
      # ncu: the tensor pipe's metrics this ncu knows (names queried, not guessed), for the precise configs in PROFILE
      ncu --query-metrics 2>/dev/null | grep -i -E "tensor|gmma" > $OUT/ncu_metrics.txt
      MET=$(awk '{print $1}' $OUT/ncu_metrics.txt | grep -E "^sm__(pipe_tensor|pipe_shared).*cycles_active$" | sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd, -)
      if [ -n "${PROFILE:-}" ]; then read -ra CFGS <<< "$PROFILE"; else CFGS=("" "bn=192"); fi
      for cfg in "${CFGS[@]}"; do
        timeout 150 ncu --kernel-name gemm_fp8 --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
          ${MET:+--metrics $MET} python bench/profile_gemm_kernel.py --config "$cfg" --n 4096 2>&1 | grep -v "^==PROF==" \
          | tail -60 > "$OUT/ncu_$(echo "${cfg:-default}" | tr '=,' '__').txt"
      done
      # the GPU port's tiled chain kernel (e4m3 m64n256k32): occupancy, integer pipes, shared-memory traffic
      timeout 150 ncu --kernel-name regex:wgref_model_chain --launch-skip 1 --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
        python bench/bench_port.py --forms wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 --reps 1 --tiles 2048 2>&1 \
        | grep -v "^==PROF==" | tail -150 > $OUT/ncu_port_e4m3.txt ;;
    record)
      rm -rf /tmp/fx && mkdir -p /tmp/fx && cp -r fixtures/device_model fixtures/INDEX.json /tmp/fx/
      timeout 150 python -m gpu.record.device_model --out /tmp/fx --jobs 2>&1 | tail -2
      timeout 200 python -m gpu.record.device_model_sparse --out /tmp/fx 2>&1 | tail -2
      timeout 150 python -m gpu.record.device_model_layout --out /tmp/fx 2>&1 | tail -2
      tar -cf $OUT/device_model.tar -C /tmp/fx . ;;
    gemmfx)
      rm -rf /tmp/fxg && mkdir -p /tmp/fxg
      timeout 200 python -m gpu.record.gemm --out /tmp/fxg 2>&1 | tee $OUT/gemm_record.txt | tail -3
      tar -cf $OUT/gemm_fixtures.tar -C /tmp/fxg .
      timeout 60 python bench/ftz_probe.py --json $OUT/ftz_probe.json 2>&1 | tail -3 ;;
    stalls)
      if [ -n "${SWEEP:-}" ]; then read -ra SW <<< "$SWEEP"
        timeout 200 python bench/bench_gemm_kernel.py --configs "${SW[@]}" --json $OUT/gemm_sweep.json 2>&1 | tail -24 | tee $OUT/gemm_sweep.txt; fi
      read -ra CFGS <<< "${STALLS:-bn=192,xtile=1 scales=smem}"
      for cfg in "${CFGS[@]}"; do
        tag=$(echo "$cfg" | tr '=,' '__')
        timeout 150 ncu --kernel-name gemm_fp8 --launch-skip 2 --launch-count 1 --section WarpStateStats --section SourceCounters \
          --section SpeedOfLight -f -o /tmp/rep_$tag python bench/profile_gemm_kernel.py --config "$cfg" --n ${N:-8192} > /dev/null 2>&1
        ncu -i /tmp/rep_$tag.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > "$OUT/sass_$tag.csv.gz"
        ncu -i /tmp/rep_$tag.ncu-rep --page details 2>&1 | tail -80 > "$OUT/stalls_$tag.txt"
      done ;;
  esac
done
