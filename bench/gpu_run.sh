#!/usr/bin/env bash
# The GPU run, as one command on the GPU machine, from the repository root, with gpu-carry/
# carried (`make gpu-carry` prepares it here): the wheels installed beside the image's torch,
# then bench/gpu_bench.py, its table and JSON written to $OUT (or gpu-results/).
#
#   device run: bash bench/gpu_run.sh [gpu_bench options], carry ["gpu-carry"]
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site gpu-carry/wheels/*.whl
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=chatsite.settings
export DATABASE_URL="sqlite:////tmp/gpu-bench.sqlite3"
out="${OUT:-$PWD/gpu-results}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv" || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
transformers.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
python3 -m bench.gpu_bench --device cuda --cache gpu-carry/models --out "$out" "$@" 2>&1 \
    | tee "$out/log.txt"
