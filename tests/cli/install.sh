#!/usr/bin/env bash
# The installed package (cmake --install): a fresh prefix that runs without the build tree,
# public headers that compile on their own, and examples/ built out of tree against that
# prefix, through find_package(SpmdKit) and through pkg-config, run under mpirun -np 2 with
# exact counts (compared with h5py's).
source "$(dirname "$0")/../support/cli_lib.sh"
BUILD=$(dirname "$SPMD")
SRC=${SPMD_SOURCE_DIR:?}
PREFIX=$WORK/prefix
# Nothing may come from the build tree or the source tree: no build-tree package registry,
# no stray library path.
unset LD_LIBRARY_PATH CMAKE_PREFIX_PATH PKG_CONFIG_PATH SPMD_MODULE_DIR
export CMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON

run install 0 60 cmake --install "$BUILD" --prefix "$PREFIX"
(cd "$PREFIX" && find . | sort) >"$WORK/tree.txt"
LAST_OUT=$WORK/tree.txt
for f in bin/spmd bin/spmdrun lib/libspmd.so lib/libspmd.so.0.1 lib/cmake/SpmdKit/SpmdKitConfig.cmake \
  lib/cmake/SpmdKit/SpmdKitConfigVersion.cmake lib/cmake/SpmdKit/SpmdKitTargets.cmake lib/pkgconfig/spmd-kit.pc \
  include/spmd/sharding/split.hpp include/spmd/sharding/step_sync.hpp include/spmd/data/dataset.hpp \
  share/spmd-kit/jobs/slurm/eval.sbatch share/spmd-kit/jobs/slurm/job_lib.sh share/spmd-kit/inputs/eval.ini \
  share/spmd-kit/examples/padded_count.cpp share/doc/spmd-kit/README.md; do
  expect_in "installed: $f" "^\./$f\$"
done
expect_not_in "internal headers stay internal" 'include/spmd/(workloads|models|backends|optim)/|output_|checkpoint'
if [ -f "$BUILD/libspmd_cuda.so" ]; then
  expect_in "the CUDA module beside libspmd" '^\./lib/libspmd_cuda\.so$'
fi
run soname 0 10 readelf -d "$PREFIX/lib/libspmd.so"
expect_in "libspmd has a SONAME with its version" 'SONAME.*\[libspmd\.so\.0\.1\]'

# Each public header alone, with only the prefix's include folder (and MPI's and HDF5's).
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
compile_headers() {
  local h rc=0
  for h in $(cd "$PREFIX/include" && find spmd -name '*.hpp'); do
    echo "#include \"$h\"" | c++ $(pkg-config --cflags spmd-kit) -fsyntax-only -x c++ - || { echo "not self-contained: $h"; rc=1; }
  done
  return $rc
}
run headers_alone 0 120 compile_headers

# The example, out of tree, against the prefix: CMake package, then pkg-config.
EXAMPLE=$PREFIX/share/spmd-kit/examples
run example_configure 0 120 cmake -S "$EXAMPLE" -B "$WORK/ex-cmake" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release
run example_package_dir 0 10 grep '^SpmdKit_DIR' "$WORK/ex-cmake/CMakeCache.txt"
expect_in "find_package found the prefix's package" "=$PREFIX/lib/cmake/SpmdKit\$"
run example_build 0 120 cmake --build "$WORK/ex-cmake"
run example_pkgconfig 0 120 bash -c "c++ -O2 -o '$WORK/padded_count_pc' '$EXAMPLE/padded_count.cpp' \$(pkg-config --cflags --libs spmd-kit) -Wl,-rpath,'$PREFIX/lib'"

DATA_FILE=$WORK/data.h5
run make_data 0 60 "$PREFIX/bin/spmd" data make-classification --out "$DATA_FILE" --samples 1001 --no-shuffle --seed 5
run reference 0 60 /usr/bin/python3 -c "
import h5py
f = h5py.File('$DATA_FILE', 'r'); x = f['X'][:, 0]; y = f['y'][:]
print('rows %d correct %d positives %d' % (len(y), ((x > 0).astype(int) == y).sum(), (y == 1).sum()))"
want=$(cat "$LAST_OUT")
# 1001 rows over 2 ranks in steps of 64: 8 steps, 1024 slots, 23 of them padding.
run example_np2 0 60 mpi 2 "$WORK/ex-cmake/padded_count" "$DATA_FILE" 64
expect_in "find_package build: exact counts over 2 ranks" "^$want padding 23 "
run example_pc_np2 0 60 mpi 2 "$WORK/padded_count_pc" "$DATA_FILE" 100
expect_in "pkg-config build: exact counts over 2 ranks" "^$want padding 199 "
run example_libs 0 10 ldd "$WORK/ex-cmake/padded_count"
expect_in "the example runs on the prefix's libspmd" "libspmd\.so\.0\.1 => $PREFIX/lib/libspmd\.so\.0\.1"
run example_missing nonzero 60 mpi 2 "$WORK/ex-cmake/padded_count" "$WORK/missing.h5"
expect_in "a missing file: one message naming it" "padded_count: error: .*missing\.h5"

# spmd from the prefix: its own libspmd, a CPU run without CUDA, a small eval.
run version 0 10 "$PREFIX/bin/spmd" --version
expect_in "spmd --version from the prefix" '^spmd \(SPMD Kit\) [0-9]+\.[0-9]+\.[0-9]+'
loaded_files() { LD_DEBUG=files "$@" 2>&1 | grep -oE '(file=|needed by )[^ ]+' | sort -u; }
run spmd_libraries 0 60 loaded_files "$PREFIX/bin/spmd" info --backend cpu
expect_in "spmd loads the prefix's libspmd (\$ORIGIN/../lib)" "needed by $PREFIX/bin/\.\./lib/libspmd\.so\.0\.1\$"
expect_not_in "nothing from the build tree" "$BUILD/"
expect_not_in "a CPU run loads no CUDA library or module" 'libcudart|libcublas|libspmd_cuda|libcuda\.'
run eval_np2 0 120 mpi 2 "$PREFIX/bin/spmd" eval --data "$DATA_FILE" --json "$WORK/eval.json"
run eval_total 0 10 /usr/bin/python3 -c "import json; j = json.load(open('$WORK/eval.json')); assert j['total'] == 1001, j['total']"
if [ -f "$PREFIX/lib/libspmd_cuda.so" ]; then
  # A stand-in driver reporting one GPU gets spmd past its probe to load the module: from
  # the folder of the prefix's libspmd, not from the build tree.
  mkdir -p "$WORK/driver"
  printf 'int cuInit(unsigned f) { (void)f; return 0; }\nint cuDeviceGetCount(int* n) { *n = 1; return 0; }\n' >"$WORK/driver/d.c"
  run fake_driver 0 60 cc -shared -fPIC -o "$WORK/driver/libcuda.so.1" "$WORK/driver/d.c"
  files_with_driver() { LD_LIBRARY_PATH="$WORK/driver" loaded_files "$@"; }
  run module_from_prefix 0 120 files_with_driver "$PREFIX/bin/spmd" info --backend auto
  expect_in "the CUDA module is loaded from the prefix" "file=$PREFIX/bin/\.\./lib/libspmd_cuda\.so\$"
fi

# The prefix moves as a whole (a shared file system mounted elsewhere): $ORIGIN paths.
mv "$PREFIX" "$WORK/moved"
run moved_eval 0 120 mpi 2 "$WORK/moved/bin/spmd" eval --data "$DATA_FILE"
run moved_pkgconfig 0 10 env PKG_CONFIG_PATH="$WORK/moved/lib/pkgconfig" pkg-config --cflags spmd-kit
expect_in "pkg-config's paths follow the moved prefix" "-I$WORK/moved/lib/pkgconfig/\.\./\.\./include"

finish
