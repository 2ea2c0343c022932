#!/usr/bin/env bash
# Here (the Debian 12 build machine): prepares device-rt/ for the lent GPU machine, which
# has CUDA 13 but no apt, no network, and maybe no Open MPI, HDF5, Boost or OpenBLAS.
#   1. builds the CUDA binaries for sm_90 (H100/H200) in $BUILD (default build-gpu);
#   2. copies spmd, libspmd.so, the CUDA module, the test binaries and the benchmarks into
#      device-rt/bin;
#   3. downloads (apt-get download) the Debian packages of every shared library those
#      binaries and Open MPI's launcher, daemon and plugins load, into device-rt/debs,
#      leaving out the C library, libgcc and libstdc++ (the GPU machine's are newer, and
#      its CUDA libraries need them) and CUDA itself (the machine has its own).
# Then, with the device tool: run `bash tools/device/run.sh` with carry ["device-rt"].
# device-rt/ is git-ignored; it must stay under the tool's 64 MiB (this script prints its size).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
RT=device-rt
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPMD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
fi
cmake --build "$BUILD" >/dev/null
grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc' "$BUILD/CMakeCache.txt" ||
  { echo "pack.sh: $BUILD was configured without CUDA (needs nvcc)" >&2; exit 1; }

rm -rf "$RT/bin"
mkdir -p "$RT/bin" "$RT/debs"
# libspmd.so and the CUDA module sit beside the binaries; run.sh puts bin/ on the library path.
# libspmd under its SONAME (libspmd.so.MAJOR.MINOR), the name the binaries ask the loader for.
bins=("$BUILD/spmd" "$BUILD/$(readlink "$BUILD/libspmd.so")" "$BUILD/libspmd_cuda.so" "$BUILD/tests/spmd_unit_tests"
      "$BUILD/tests/spmd_mpi_tests" "$BUILD/tests/spmd_cuda_tests")
for b in "$BUILD"/bench_*; do [ -x "$b" ] && bins+=("$b"); done
cp "${bins[@]}" "$RT/bin/"
cp -r tests/support "$RT/" 2>/dev/null || true

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
du -sh "$RT" | awk '{print "pack.sh: device-rt is " $1 " (the device tool carries at most 64 MiB with the working tree)"}'
