#!/usr/bin/env bash
# The Debian package on a clean system (tools/test.sh --packaging; root, a few minutes, so not
# part of ctest): builds the .debs with CPack, makes a minimal Debian 12 root with debootstrap
# from the mirror apt uses here, installs spmd-kit_*.deb there with apt-get (which brings its
# Depends from the mirror: nothing of this machine's libraries), and runs spmd --version,
# spmd data make-classification, spmd logreg and spmd eval under spmdrun -np 2 inside it.
# Prints each package's size and Depends. SPMD_PACKAGING_ROOT: where the clean root goes
# (default a temporary folder; removed at the end).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SPMD_BUILD_DIR:-$root/build}
start=$(date +%s)
say() { echo "packaging: $* ($(( $(date +%s) - start )) s)"; }
die() { echo "packaging: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"

"$root/tools/setup.sh"
export DEBIAN_FRONTEND=noninteractive
command -v debootstrap >/dev/null || { apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; say "installed debootstrap"; }
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >"$build/cpack.log" 2>&1) || { cat "$build/cpack.log" >&2; die "cpack failed"; }
deb=$(ls "$build"/packages/spmd-kit_*_amd64.deb)
for f in "$build"/packages/*.deb; do
  echo "package $(basename "$f"): $(du -k "$f" | cut -f1) KiB, Installed-Size $(dpkg-deb -f "$f" Installed-Size) KiB"
  echo "  Depends: $(dpkg-deb -f "$f" Depends)"
done

# The mirror apt-get uses here (deb822 or one-line sources).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d}"
clean=${SPMD_PACKAGING_ROOT:-$(mktemp -d /tmp/spmd-clean-root.XXXXXX)}
mounts=()
cleanup() {
  local m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  rm -rf --one-file-system "$clean"
}
trap cleanup EXIT
say "debootstrap bookworm (minbase) from $mirror into $clean"
debootstrap --variant=minbase bookworm "$clean" "$mirror" >"$clean.debootstrap.log" 2>&1 ||
  { tail -20 "$clean.debootstrap.log" >&2; die "debootstrap failed (log $clean.debootstrap.log)"; }
rm -f "$clean.debootstrap.log"
# Open MPI needs /proc, /sys (hwloc) and /dev/shm (shared-memory transport) inside.
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$clean/$m"
  mounts+=("$clean/$m")
done
printf '#!/bin/sh\nexit 101\n' >"$clean/usr/sbin/policy-rc.d"
chmod +x "$clean/usr/sbin/policy-rc.d"
cp "$deb" "$clean/tmp/"
inside() { chroot "$clean" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root OMPI_MCA_rmaps_base_oversubscribe=1 bash -c "$1"; }
say "apt-get install ./$(basename "$deb") in the clean root"
inside "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/$(basename "$deb") >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }"
inside "echo \"packages installed: \$(dpkg -l | grep -c '^ii')\"; dpkg -s spmd-kit | grep -E '^(Status|Version):'"
say "runs inside the clean root"
inside 'set -eo pipefail; cd /tmp
spmd --version
spmd data make-classification --out /tmp/c.h5 --samples 2000 --features 20 --classes 3 --informative 5 --seed 0
spmdrun -np 2 spmd logreg --data /tmp/c.h5 --quiet --weights-out /tmp/w.h5 --json /tmp/logreg.json
spmdrun -np 2 spmd eval --data /tmp/c.h5 --model logreg --weights /tmp/w.h5 --json /tmp/eval.json | grep -vE "^#   (category|compute|communication|io|host_device|other|total) "
total=$(grep -oE "\"total\": ?[0-9]+" /tmp/eval.json | grep -oE "[0-9]+$")
[ "$total" = 2000 ] || { echo "eval counted $total of the 2000 rows"; exit 1; }
echo "eval under spmdrun -np 2: all 2000 rows counted once"'
say "done: the package installs and runs on a clean Debian 12"
