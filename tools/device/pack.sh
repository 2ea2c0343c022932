#!/usr/bin/env bash
# Here (the Debian 12 build machine): prepares device-rt/ for the lent GPU machine, which
# has CUDA 13 but no apt, no network, and maybe no Open MPI, HDF5, Boost or OpenBLAS.
#   1. builds the CUDA binaries in $BUILD (default build-gpu, configured for sm_90: H100/H200;
#      BUILD=build reuses the main build when its CUDA module holds sm_90 code, checked here);
#   2. copies spmd, libspmd.so, the CUDA module, the test binaries and the benchmarks into
#      device-rt/bin, and the test data into device-rt/data: Fashion-MNIST's test.h5 (uint8),
#      the first 10000 rows of train.h5 (gzip; the whole is 47 MB, past the carry limit), the small sets,
#      ONNX models (PyTorch's exports, made here with Debian's python3-torch) and ONNX's node tests;
#   3. downloads (apt-get download) the Debian packages of every shared library those
#      binaries and Open MPI's launcher, daemon and plugins load, into device-rt/debs,
#      leaving out the C library, libgcc and libstdc++ (the GPU machine's are newer, and
#      its CUDA libraries need them) and CUDA itself (the machine has its own).
# --stage-only: steps 2 without the build, the sm_90 check and the packages (a local check of
# run.sh with this machine's own libraries: tests/cli/device_scripts.sh).
# Then, with the device tool: tools/device/README.md. SPMD_DEVICE_RT names another folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
RT=${SPMD_DEVICE_RT:-device-rt}
STAGE_ONLY=0
[ "${1:-}" = --stage-only ] && STAGE_ONLY=1
TRAIN_ROWS=10000

if [ $STAGE_ONLY = 0 ]; then
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPMD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  fi
  cmake --build "$BUILD" -j "${JOBS:-2}" >/dev/null
  grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc' "$BUILD/CMakeCache.txt" ||
    { echo "pack.sh: $BUILD was configured without CUDA (needs nvcc)" >&2; exit 1; }
  # The module's nvcc flags (this machine has no cuobjdump to read the binary itself).
  grep -q 'arch=compute_90,code=\[[^]]*sm_90' "$BUILD/build.ninja" ||
    { echo "pack.sh: $BUILD builds no sm_90 code (H100/H200): use the default BUILD=build-gpu" >&2; exit 1; }
fi

rm -rf "$RT/bin" "$RT/data"
mkdir -p "$RT/bin" "$RT/data/fashion" "$RT/debs"
# libspmd under its SONAME (libspmd.so.MAJOR.MINOR), the name the binaries ask the loader for;
# the CUDA module beside it (run.sh puts bin/ on the library path).
bins=("$BUILD/spmd" "$BUILD/$(readlink "$BUILD/libspmd.so")" "$BUILD/tests/spmd_unit_tests" "$BUILD/tests/spmd_mpi_tests"
      "$BUILD/tests/spmd_onnx_conformance")
for f in "$BUILD/libspmd_cuda.so" "$BUILD/tests/spmd_cuda_tests" "$BUILD"/bench_*; do
  if [ -x "$f" ]; then bins+=("$f")
  elif [ $STAGE_ONLY = 0 ]; then echo "pack.sh: $f missing" >&2; exit 1; fi
done
cp "${bins[@]}" "$RT/bin/"
# Symbol tables off the host code (3 MiB of the carry's 64; gtest and our errors name the tests and
# calls themselves). The CUDA module keeps its own: its kernels' names are what ncu prints.
for f in "$RT"/bin/*; do [ "${f##*/}" = libspmd_cuda.so ] || strip --strip-unneeded "$f"; done

# The CLI tests' data, made by the project (tests/support/prepare_data.sh) if this build has none.
DATA=${SPMD_TEST_DATA_DIR:-$BUILD/test-data}
[ -f "$DATA/fashion/test.h5" ] && [ -f "$DATA/rows4097.h5" ] ||
  SPMD_CLI=$BUILD/spmd SPMD_TEST_DATA_DIR=$DATA bash tests/support/prepare_data.sh
cp "$DATA/fashion/test.h5" "$RT/data/fashion/"
cp "$DATA/logreg-small.h5" "$DATA/rows4097.h5" "$RT/data/"
/usr/bin/python3 - "$DATA/fashion/train.h5" "$TRAIN_ROWS" "$RT/data/fashion/train.h5" <<'PYEOF'
import sys, h5py
src, rows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with h5py.File(src, "r") as f, h5py.File(out, "w") as g:  # gzip: 4 MiB less to carry; read once, before timing
    for key in ("images", "labels"):
        data = f[key][:rows]
        g.create_dataset(key, data=data, compression="gzip", chunks=(min(rows, 1000),) + data.shape[1:])
    g.attrs.update(f.attrs)
PYEOF

# ONNX models for eval --model onnx on the GPU (the machine there has no torch): PyTorch's
# exports of tests/support/torch_models.py, and a graph the CUDA backend cannot run.
mkdir -p "$RT/data/onnx"
/usr/bin/python3 tests/support/torch_models.py export "$RT/data/onnx" >/dev/null
/usr/bin/python3 - "$RT/data/onnx/cast.onnx" <<'PYEOF'
import sys, onnx
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Cast", ["f"], ["c"], name="c", to=T.INT64),
                       helper.make_node("Cast", ["c"], ["y"], to=T.FLOAT)], "c",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 784])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PYEOF

# ONNX's node tests (Debian's libonnx-testdata), for the conformance runner on the GPU: only
# those the CPU runs (the others use ops spmd lacks, unsupported on the GPU too), 4.5 MiB gzipped
# instead of 8.4 (all of them put device-rt over the carry limit).
ONNX_TESTS=/usr/include/onnx/backend/test/data
if [ -d "$ONNX_TESTS/node" ]; then
  list=$(mktemp -d)
  export LC_ALL=C  # one collation for sort and join
  "$BUILD/tests/spmd_onnx_conformance" "$ONNX_TESTS" | sed -n 's/^unsupported \([^:]*\):.*/\1/p' | sort -u >"$list/unsupported"
  (cd "$ONNX_TESTS" && for d in node/* pytorch-converted/* pytorch-operator/* simple/*; do echo "${d##*/} $d"; done) |
    sort -k1,1 | join -v 1 - "$list/unsupported" | cut -d' ' -f2 >"$list/supported"
  echo "pack.sh: ONNX node tests: $(wc -l <"$list/supported") the CPU runs, $(wc -l <"$list/unsupported") left out"
  tar czf "$RT/data/onnx-tests.tar.gz" -C "$ONNX_TESTS" -T "$list/supported"
  rm -rf "$list"
fi

if [ $STAGE_ONLY = 0 ]; then
  # Every library the binaries, mpirun/orted and the Open MPI plugins resolve to here.
  ompi_plugins=(/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so)
  libs=$( { for f in "${bins[@]}" /usr/bin/orterun /usr/bin/orted "${ompi_plugins[@]}"; do ldd "$f" 2>/dev/null; done; } |
    awk '/=> \//{print $3}' | sort -u)
  owner() {  # the package that ships a file (Debian 12 has merged /usr: try both spellings)
    local r; r=$(readlink -f "$1")
    dpkg -S "$r" 2>/dev/null || dpkg -S "${r#/usr}" 2>/dev/null || dpkg -S "/usr$r" 2>/dev/null || true
  }
  packages=$( { for l in $libs; do owner "$l"; done; } | cut -d: -f1 | tr ', ' '\n\n' | grep -v '^$' | sort -u |
    grep -vxE 'libc6|libgcc-s1|libstdc\+\+6|cuda-.*|libcublas.*|libcudart.*')
  packages="$packages openmpi-bin openmpi-common libopenmpi3"
  echo "pack.sh: $(echo $packages | wc -w) packages"
  (cd "$RT/debs" && rm -f ./*.deb && apt-get download $packages >/dev/null)
fi
rm -rf "$RT/out"
# The device tool carries the working tree (tracked and untracked files git does not ignore)
# with device-rt: at most 64 MiB in all; 1 MiB kept in hand.
rt_bytes=$(du -sb "$RT" | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
mib=$(( (rt_bytes + tree_bytes + 1048575) / 1048576 ))
echo "pack.sh: $RT and the working tree are $mib MiB (the device tool carries at most 64 MiB)"
[ "$mib" -le 63 ] || { echo "pack.sh: $RT and the working tree are over 63 MiB: the call would be refused" >&2; exit 1; }
