#!/usr/bin/env bash
# The device runs of one session, batched (bash bench/h200_session.sh STEP... ; logs and JSON to $OUT).
#   gemm    FP8 GEMM kernel: bit check against refmodel.gemm and the bench against torch._scaled_mm
#   dense   GPU fuzz engine, dense forms (RS, chains): gpu tests, the port bench, bench_fuzz
#   sparse  GPU fuzz engine, sparse forms: gpu tests and bench
#   layout  GPU fuzz engine, layout family: gpu tests and bench
#   record  the device_model digest fixtures (jobs, sparse, layout) -> $OUT/device_model.tar
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
for step in "$@"; do
  echo "=== $step $(date -u +%T)"
  case $step in
    gemm)
      timeout 200 python -m gpu.record.gemm --check-only --configs "" "scales=smem" "scales=smem,xtile=1" 2>&1 | tail -4 | tee $OUT/gemm_check.txt
      timeout 200 python bench/bench_gemm_kernel.py --configs "" "scales=smem" "scales=smem,xtile=1" "promote=0" --check \
        --json $OUT/gemm_kernel.json 2>&1 | tail -16 | tee $OUT/gemm_bench.txt ;;
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
    record)
      rm -rf /tmp/fx && mkdir -p /tmp/fx && cp -r fixtures/device_model fixtures/INDEX.json /tmp/fx/
      timeout 150 python -m gpu.record.device_model --out /tmp/fx --jobs 2>&1 | tail -2
      timeout 200 python -m gpu.record.device_model_sparse --out /tmp/fx 2>&1 | tail -2
      timeout 150 python -m gpu.record.device_model_layout --out /tmp/fx 2>&1 | tail -2
      tar -cf $OUT/device_model.tar -C /tmp/fx . ;;
  esac
done
