#!/usr/bin/env bash
# HDF5 files from strangers (issue 56, rule 1): a data file may lead HDF5 to other files, through
# an external link, external raw storage (h5py's external=) or a virtual dataset's sources
# (h5py's VirtualLayout). Made with h5py as users make them, each run by eval and logreg on 2
# ranks: a file outside the data file's folder (an absolute path, '../', or a symbolic link out
# of it) is refused naming the link and the file, and read with --allow-outside-files (the values
# of a native copy, bit for bit); a virtual dataset whose source file or dataset is missing
# (HDF5 would read fill values and report an accuracy over zeros) or that is its own source
# (HDF5 recursed until a segfault) is refused; sources, links and raw files beside the file
# are read as before; a linked file that is an output of the run (a source named as
# --predictions, --json or --weights-out) is refused. Every refusal within seconds on every rank, no output left.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
RC=$WORK/rc
OUT=$WORK/out
mkdir -p "$RC" "$WORK/elsewhere" "$WORK/in"
run make_files 0 60 $PY - "$WORK" <<'PYEOF'
import os, sys, h5py, numpy as np
work = sys.argv[1]
d, out = f"{work}/in", f"{work}/elsewhere"
rng = np.random.default_rng(4)
X = rng.normal(size=(40, 6)).astype(np.float32)
y = (X[:, 0] > 0).astype(np.int32) + (X[:, 1] > 0)
def pair(path, xs):
    with h5py.File(path, "w") as f:
        xs(f)
        f["y"] = y
pair(f"{d}/native.h5", lambda f: f.create_dataset("X", data=X))
pair(f"{out}/source.h5", lambda f: f.create_dataset("X", data=X))
pair(f"{d}/source_beside.h5", lambda f: f.create_dataset("X", data=X))
os.symlink(f"{out}/source.h5", f"{d}/link_out.h5")           # beside it by name, elsewhere in fact
X.tofile(f"{out}/raw.bin"); X.tofile(f"{d}/raw_beside.bin")
def virtual(path, source_file, source_name="X", fill=0):
    def make(f):
        layout = h5py.VirtualLayout(shape=X.shape, dtype="f4")
        layout[:] = h5py.VirtualSource(source_file, source_name, shape=X.shape)
        f.create_virtual_dataset("X", layout, fillvalue=fill)
    pair(path, make)
virtual(f"{d}/vds_abs.h5", f"{out}/source.h5")
virtual(f"{d}/vds_up.h5", "../elsewhere/source.h5")
virtual(f"{d}/vds_symlink.h5", "link_out.h5")
virtual(f"{d}/vds_beside.h5", "source_beside.h5")
virtual(f"{d}/vds_missing_file.h5", "nothere.h5")
virtual(f"{d}/vds_missing_dataset.h5", "source_beside.h5", "nothing")
virtual(f"{d}/vds_self.h5", ".")
with h5py.File(f"{d}/vds_cycle.h5", "w") as f:  # A's source is B, B's is A
    for a, b in (("A", "B"), ("B", "A")):
        layout = h5py.VirtualLayout(shape=X.shape, dtype="f4")
        layout[:] = h5py.VirtualSource(".", b, shape=X.shape)
        f.create_virtual_dataset(a, layout)
    f["y"] = y
pair(f"{d}/elink_abs.h5", lambda f: f.__setitem__("X", h5py.ExternalLink(f"{out}/source.h5", "/X")))
pair(f"{d}/elink_beside.h5", lambda f: f.__setitem__("X", h5py.ExternalLink("source_beside.h5", "/X")))
pair(f"{d}/raw_up.h5", lambda f: f.create_dataset("X", shape=X.shape, dtype="f4", external=[("../elsewhere/raw.bin", 0, X.nbytes)]))
pair(f"{d}/raw_beside.h5", lambda f: f.create_dataset("X", shape=X.shape, dtype="f4", external=[("raw_beside.bin", 0, X.nbytes)]))
PYEOF
cd "$WORK/in" || exit 1

LOGREG=(--maxiter 20 --quiet --classes 3)
run logreg_native 0 60 mpi 2 "$SPMD" logreg --data native.h5 "${LOGREG[@]}" --weights-out "$WORK/w_native.h5"
same_weights() {  # A B
  $PY - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
same = all(np.array_equal(a[k][...], b[k][...]) for k in a)
print("the native copy's weights, bit for bit" if same else "weights differ")
sys.exit(0 if same else 1)
PYEOF
}

# Outside the folder: refused by default, read with --allow-outside-files.
for c in "vds_abs:reads its source 0 of virtual dataset '/?X' .* from" "vds_up:reads its source 0 of virtual dataset" \
         "vds_symlink:reads its source 0 of virtual dataset" "elink_abs:is reached through an external link '/X'" \
         "raw_up:keeps its values \(HDF5 external storage\) in the raw file"; do
  name=${c%%:*}; pattern=${c#*:}
  refuse "eval_$name" 2 "'$name.h5': features dataset '/?X' $pattern.*elsewhere.*outside the data file's folder .*--allow-outside-files" \
    "$SPMD" eval --data "$name.h5" --classes 3 --predictions "$OUT/p.h5"
  refuse "logreg_$name" 2 "'$name.h5': features dataset '/?X' $pattern" \
    "$SPMD" logreg --data "$name.h5" "${LOGREG[@]}" --weights-out "$OUT/w.h5"
  run "logreg_${name}_allowed" 0 60 mpi 2 "$SPMD" logreg --data "$name.h5" "${LOGREG[@]}" --allow-outside-files \
    --weights-out "$WORK/w_$name.h5"
  run "${name}_allowed_same_bits" 0 30 same_weights "$WORK/w_native.h5" "$WORK/w_$name.h5"
done

# Beside the file: read as before, the native copy's bits.
for name in vds_beside elink_beside raw_beside; do
  run "logreg_$name" 0 60 mpi 2 "$SPMD" logreg --data "$name.h5" "${LOGREG[@]}" --weights-out "$WORK/w_$name.h5"
  run "${name}_same_bits" 0 30 same_weights "$WORK/w_native.h5" "$WORK/w_$name.h5"
done
# Run from another folder, the sources beside the file are still found.
(cd "$WORK" && run logreg_vds_beside_from_parent 0 60 mpi 2 "$SPMD" logreg --data in/vds_beside.h5 "${LOGREG[@]}" \
  --weights-out "$WORK/w_parent.h5")
run vds_beside_from_parent_same_bits 0 30 same_weights "$WORK/w_native.h5" "$WORK/w_parent.h5"

# A linked file that is an output of the run: the run would replace what it reads (or read an
# earlier run's output as data). Refused with or without the option, the file untouched.
sums_before=$(md5sum source_beside.h5 raw_beside.bin)
for allow in "" --allow-outside-files; do
  refuse "vds_source_is_predictions$allow" 2 "'vds_beside.h5': features dataset '/?X' reads its source 0 .* which is --predictions 'source_beside.h5', an output of this run" \
    "$SPMD" eval --data vds_beside.h5 --classes 3 $allow --predictions source_beside.h5
  refuse "elink_target_is_json$allow" 2 "'elink_beside.h5': features dataset '/?X' is reached through an external link '/X' into .* which is --json '$WORK/in/source_beside.h5', an output" \
    "$SPMD" logreg --data elink_beside.h5 "${LOGREG[@]}" $allow --json "$WORK/in/source_beside.h5"
  refuse "raw_file_is_weights_out$allow" 2 "'raw_beside.h5': features dataset '/?X' keeps its values \(HDF5 external storage\) in the raw file 'raw_beside.bin', which is --weights-out '../in/raw_beside.bin', an output" \
    "$SPMD" logreg --data raw_beside.h5 "${LOGREG[@]}" $allow --weights-out ../in/raw_beside.bin
done
run linked_outputs_untouched 0 10 test "$sums_before" = "$(md5sum source_beside.h5 raw_beside.bin)"

# Virtual datasets that would read fill values or recurse: refused, with or without the option.
for allow in "" --allow-outside-files; do
  refuse "vds_missing_file$allow" 2 "the file of its source 0 of virtual dataset '/?X' \('X' in 'nothere.h5'\) is not at .*fill value" \
    "$SPMD" eval --data vds_missing_file.h5 --classes 3 $allow --predictions "$OUT/p.h5"
  refuse "vds_missing_dataset$allow" 2 "its source 0 of virtual dataset '/?X' \('nothing' in 'source_beside.h5'\) names no dataset" \
    "$SPMD" logreg --data vds_missing_dataset.h5 "${LOGREG[@]}" $allow --weights-out "$OUT/w.h5"
  refuse "vds_self$allow" 2 "'vds_self.h5': features dataset '/?X' is a virtual dataset that is its own source" \
    "$SPMD" eval --data vds_self.h5 --classes 3 $allow --predictions "$OUT/p.h5"
  refuse "vds_cycle$allow" 2 "'vds_cycle.h5': features dataset '/?A' is a virtual dataset that is its own source" \
    "$SPMD" logreg --data vds_cycle.h5 --features-key A --labels-key y "${LOGREG[@]}" $allow --weights-out "$OUT/w.h5"
done
finish
