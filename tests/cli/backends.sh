#!/usr/bin/env bash
# Backends as modules: spmd and libspmd link no CUDA library; a CPU run maps none; --backend
# auto probes the driver before loading the CUDA module and falls back to the CPU saying
# why; a missing, foreign, stale or broken module is reported by file and reason (dlerror),
# and --backend cuda then fails on every rank (one agreed message, printed by rank 0).
#
# Without a GPU here, a stand-in driver (a tiny libcuda.so.1 whose cuInit/cuDeviceGetCount
# report one GPU) makes the probe pass, so that the module-loading paths run for real.
source "$(dirname "$0")/../support/cli_lib.sh"
BUILD=$(dirname "$SPMD")
MODULE=$BUILD/libspmd_cuda.so
loaded_libraries() { LD_DEBUG=files "$@" 2>&1 | grep -oE 'file=[^ ]+' | sort -u; }

# 1. Link time: no CUDA library in spmd's or libspmd's dependencies.
run ldd_spmd 0 10 ldd "$SPMD"
expect_not_in "spmd needs no CUDA library" 'libcudart|libcublas|libcuda\.'
run ldd_libspmd 0 10 ldd "$BUILD/libspmd.so"
expect_not_in "libspmd needs no CUDA library" 'libcudart|libcublas|libcuda\.'

# 2. Run time: a CPU run maps no CUDA library and no module, on every rank.
run cpu_run_libraries 0 60 loaded_libraries mpirun -np 2 --oversubscribe "$SPMD" info --backend cpu
expect_in "the CPU run loaded libspmd" 'libspmd\.so'
expect_not_in "a CPU run loads no CUDA library or module" 'libcudart|libcublas|libspmd_cuda|libcuda\.'

# 3. auto without a driver: CPU, saying why, and still no module.
run auto_no_driver 0 60 loaded_libraries "$SPMD" info --backend auto
expect_not_in "auto without a driver loads no module" 'libcudart|libcublas|libspmd_cuda'
run auto_no_driver_note 0 60 "$SPMD" info --backend auto --json "$WORK/auto.json"
expect_in "auto says it uses the CPU and why" 'backend cpu \(--backend auto: using CPU \(cuda: no CUDA driver'
run auto_json 0 10 /usr/bin/python3 -c "import json; j=json.load(open('$WORK/auto.json')); assert j['backend']=='cpu', j; assert 'no CUDA driver' in j['backend_note'], j"
run cuda_no_driver nonzero 60 mpi 2 "$SPMD" info --backend cuda
expect_in "--backend cuda without a driver: rank 0 says why" 'rank 0 on .*--backend cuda but no GPU is usable here \(no CUDA driver'

# A stand-in driver that reports one GPU (CUresult 0 = CUDA_SUCCESS).
FAKE=$WORK/fake-driver
mkdir -p "$FAKE"
cat >"$FAKE/driver.c" <<'EOF'
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
EOF
run fake_driver_build 0 60 cc -shared -fPIC -o "$FAKE/libcuda.so.1" "$FAKE/driver.c"
with_gpu() { LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

# 4. The module directory holds no module.
EMPTY=$WORK/no-modules
mkdir -p "$EMPTY"
run missing_auto 0 60 with_gpu env SPMD_MODULE_DIR="$EMPTY" "$SPMD" info --backend auto
if [ -f "$MODULE" ]; then
  expect_in "missing module: auto falls back naming the file and dlerror" \
    "using CPU \(cuda: cannot load the cuda backend module $EMPTY/libspmd_cuda.so: .*cannot open shared object file"
else
  expect_in "no CUDA in this build: auto falls back saying so" 'using CPU \(cuda: not built'
fi
run missing_cuda nonzero 60 with_gpu env SPMD_MODULE_DIR="$EMPTY" mpirun -np 2 --oversubscribe -x LD_LIBRARY_PATH -x SPMD_MODULE_DIR "$SPMD" info --backend cuda
expect_in "missing module: --backend cuda fails on rank 0 naming the file" "rank 0 on .*libspmd_cuda.so"

if [ -f "$MODULE" ]; then
  # 5. A broken file (not a shared object), a shared object without the entry, and a module
  # built for another spmd (its entry returns no backend).
  BAD=$WORK/bad-modules
  mkdir -p "$BAD/garbage" "$BAD/foreign" "$BAD/stale"
  echo "not an ELF file" >"$BAD/garbage/libspmd_cuda.so"
  echo 'int unrelated(void) { return 1; }' >"$BAD/foreign.c"
  echo 'const void* spmd_cuda_backend_v1(void) { return 0; }' >"$BAD/stale.c"
  run foreign_build 0 60 cc -shared -fPIC -o "$BAD/foreign/libspmd_cuda.so" "$BAD/foreign.c"
  run stale_build 0 60 cc -shared -fPIC -o "$BAD/stale/libspmd_cuda.so" "$BAD/stale.c"
  run garbage_auto 0 60 with_gpu env SPMD_MODULE_DIR="$BAD/garbage" "$SPMD" info --backend auto
  expect_in "garbage module: auto falls back with dlerror's reason" \
    "using CPU \(cuda: cannot load the cuda backend module $BAD/garbage/libspmd_cuda.so: .*(invalid ELF header|file too short)"
  run garbage_cuda nonzero 60 with_gpu env SPMD_MODULE_DIR="$BAD/garbage" "$SPMD" info --backend cuda
  expect_in "garbage module: --backend cuda names the file" "$BAD/garbage/libspmd_cuda.so"
  run foreign_cuda nonzero 60 with_gpu env SPMD_MODULE_DIR="$BAD/foreign" "$SPMD" info --backend cuda
  expect_in "a shared object without the entry is refused by name" \
    "$BAD/foreign/libspmd_cuda.so is not an spmd cuda backend module \(no spmd_cuda_backend_v1"
  run stale_auto 0 60 with_gpu env SPMD_MODULE_DIR="$BAD/stale" "$SPMD" info --backend auto
  expect_in "a module of another build is refused, and auto falls back" \
    "using CPU \(cuda: $BAD/stale/libspmd_cuda.so was built for another spmd .*rebuild it"

  # 6. The real module loads (cudart comes with it) and then finds no usable GPU behind the
  # stand-in driver: auto falls back, cuda fails; the run is still clean on every rank.
  run real_module_auto 0 120 with_gpu loaded_libraries "$SPMD" info --backend auto
  expect_in "with a driver, auto loads the module" 'libspmd_cuda\.so'
  expect_in "and the module brings cudart" 'libcudart'
  run real_module_auto_note 0 120 with_gpu "$SPMD" info --backend auto
  expect_in "the module loaded but found no GPU: auto falls back saying so" 'using CPU \(cuda: cudaGetDeviceCount'
  run real_module_cuda nonzero 120 with_gpu mpirun -np 2 --oversubscribe -x LD_LIBRARY_PATH "$SPMD" info --backend cuda
  expect_in "--backend cuda: no usable device, on rank 0" 'rank 0 on .*--backend cuda but no GPU is usable here \(cudaGetDeviceCount'

  # onnx under --backend auto: the GPU backend is asked whether it runs the graph (it loads the
  # module, as for any model); with no usable GPU auto still takes the CPU, saying why, and
  # --backend cuda gives the usual error, on every rank.
  ONNX_SUB=$WORK/onnx_sub.h5
  run onnx_inputs 0 60 fashion_subset 64 "$ONNX_SUB"
  run onnx_model 0 60 /usr/bin/python3 -c "
import onnx, numpy as np
from onnx import helper, numpy_helper, TensorProto as T
w = numpy_helper.from_array(np.full((784, 10), 0.01, np.float32), 'W')
g = helper.make_graph([helper.make_node('Flatten', ['x'], ['f']), helper.make_node('Gemm', ['f', 'W'], ['y'])], 'lr',
    [helper.make_tensor_value_info('x', T.FLOAT, ['batch', 28, 28, 1])],
    [helper.make_tensor_value_info('y', T.FLOAT, ['batch', 10])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '$WORK/lr.onnx')"
  run onnx_auto_note 0 120 with_gpu "$SPMD" eval --data "$ONNX_SUB" --model onnx --weights "$WORK/lr.onnx" --backend auto
  expect_in "auto with onnx and no usable GPU takes the CPU, saying why" "--backend auto: using CPU \(cuda: cudaGetDeviceCount"
  expect_not_in "no CPU-only note for a graph the GPU backend runs" "runs on the CPU \("
  run onnx_auto_libraries 0 120 with_gpu loaded_libraries "$SPMD" eval --data "$ONNX_SUB" --model onnx --weights "$WORK/lr.onnx" --backend auto
  expect_in "auto loads the module for onnx (the GPU backend runs it)" 'libspmd_cuda\.so'
  run onnx_cuda_no_gpu nonzero 120 with_gpu mpirun -np 2 --oversubscribe -x LD_LIBRARY_PATH "$SPMD" eval --data "$ONNX_SUB" \
    --model onnx --weights "$WORK/lr.onnx" --backend cuda
  expect_in "--backend cuda with onnx and no usable GPU: the usual error, rank 0" 'rank 0 on .*--backend cuda but no GPU is usable here \(cudaGetDeviceCount'
  run zero_auto_libraries 0 120 with_gpu loaded_libraries "$SPMD" eval --data "$ONNX_SUB" --model zero --backend auto
  expect_in "while auto loads the module for a model the GPU backend runs" 'libspmd_cuda\.so'
else
  echo "SKIP module-loading checks: this build has no CUDA module ($MODULE)"
fi

# 7. Unknown backends are refused up front with the accepted names.
run unknown_backend nonzero 30 "$SPMD" info --backend rocm
expect_in "an unknown backend is refused with the accepted values" "--backend must be one of auto, cpu, cuda \(got 'rocm'\)"

finish
