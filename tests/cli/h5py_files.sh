#!/usr/bin/env bash
# Valid HDF5 files as h5py makes them (issue 32, section 2), on 1 and 2 ranks:
#  - chunked datasets whose chunks were never all written (a dataset assigned in part): read
#    as HDF5 defines them, the fill value (0, or the dataset's fillvalue=), so that logreg's
#    objective and eval's predictions (pad, infinite-pad) are those of the same values
#    written out; one whose file says never to fill is refused on every rank by name;
#  - `spmd data info` names the unwritten chunks, and calls column chunks (N, 1) with gzip
#    slow by nature with the h5repack command that rechunks them (which is run here);
#  - values in external raw files (h5py's external=): read beside the file from any working
#    directory, as HDF5 reads them, and under HDF5_EXTFILE_PREFIX; a missing or short raw file
#    refused on every rank by name;
#  - datasets reached through soft and external links (a master file over another's group,
#    aliases): found by the key rules, read as themselves; a dangling link named on every rank;
#  - class indices stored as float32 / float64 (a pandas column): read as the integers they hold,
#    the objective and predictions of int64 labels; a label that is no whole number refused by row;
#  - a file held open for writing by h5py (HDF5's file lock): refused on every rank naming
#    HDF5_USE_FILE_LOCKING, which then lets the run read it.
# Every job is bounded (a rank left in a collective shows as a timeout); no output file is
# left by a refused one. The read speed of chunked files: tools/bench/bench_h5_read.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
py() { /usr/bin/python3 -c "$1"; }
H=$WORK/h5py
OUT=$WORK/out
RC=$WORK/rc
mkdir -p "$H" "$OUT" "$RC"
run make_files 0 120 /usr/bin/python3 - "$H" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(32)
n = 3000
X = rng.integers(0, 256, (n, 28, 28, 1), dtype=np.uint8)
y = rng.integers(0, 10, n).astype(np.int64)
def save(name, x, labels, xopts={}, yopts={}):
    with h5py.File(f"{d}/{name}.h5", "w") as h:
        h.create_dataset("x", data=x, **xopts)
        h.create_dataset("y", data=labels, **yopts)
# Features: chunks 0, 1 and 4 of 6 written (rows 2048..2559 are the 5th chunk); the rest are
# the fill value 0. The reference holds the same values, every row written, contiguous.
with h5py.File(f"{d}/part_x.h5", "w") as h:
    x = h.create_dataset("x", shape=X.shape, dtype="u1", chunks=(512, 28, 28, 1))
    x[:1024] = X[:1024]
    x[2048:2560] = X[2048:2560]
    h.create_dataset("y", data=y)
Xref = np.zeros_like(X); Xref[:1024] = X[:1024]; Xref[2048:2560] = X[2048:2560]
save("part_x_ref", Xref, y)
# Labels int64 in chunks of 500, the last three never written, fill value 3; float32 features.
F = rng.normal(size=(n, 9)).astype(np.float32)
with h5py.File(f"{d}/part_y.h5", "w") as h:
    h.create_dataset("x", data=F)
    yy = h.create_dataset("y", shape=(n,), dtype="i8", chunks=(500,), fillvalue=3)
    yy[:1500] = y[:1500]
yref = y.copy(); yref[1500:] = 3
save("part_y_ref", F, yref)
# Gzip'd features in part: the same values as part_x.
with h5py.File(f"{d}/part_gzip.h5", "w") as h:
    x = h.create_dataset("x", shape=X.shape, dtype="u1", chunks=(512, 28, 28, 1), compression="gzip")
    x[:1024] = X[:1024]
    x[2048:2560] = X[2048:2560]
    h.create_dataset("y", data=y)
# A dataset whose file says never to fill: its unwritten rows have no values.
with h5py.File(f"{d}/never.h5", "w") as h:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((512, 9))
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    h5py.h5d.create(h.id, b"x", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple((n, 9)), dcpl=dcpl)
    h["x"][:512] = F[:512]
    h.create_dataset("y", data=y)
# Column chunks with gzip (slow by nature), and row chunks with gzip (fine), 20000 rows.
m = 20000
C = np.tile(np.arange(784, dtype=np.uint8) // 4, (m, 1)) + rng.integers(0, 4, (m, 784), dtype=np.uint8)
save("columns", C, rng.integers(0, 10, m), xopts=dict(chunks=(m, 1), compression="gzip"))
save("rows_gzip", C, rng.integers(0, 10, m), xopts=dict(chunks=(1024, 784), compression="gzip"))
save("locked", X, y)
PY

# --- Chunks never written: the fill value, as HDF5 (and h5py) read them ----------------------
value() { py "import json; print(repr(json.load(open('$1'))['value']))"; }
same_bits() {  # same_bits NAME A B: the two prediction files hold the same bits
  run "$1" 0 30 py "
import h5py
a, b = h5py.File('$2'), h5py.File('$3')
for k in ('predicted', 'probabilities', 'label'):
    assert a[k][...].tobytes() == b[k][...].tobytes(), k"
}
run weights 0 60 "$SPMD" logreg --data "$H/part_x_ref.h5" --maxiter 3 --weights-out "$WORK/wx.h5" --quiet
run weights_y 0 60 "$SPMD" logreg --data "$H/part_y_ref.h5" --maxiter 3 --weights-out "$WORK/wy.h5" --quiet
for np in 1 2; do
  for name in part_x part_gzip part_y; do
    ref=part_${name#part_}_ref; [ $name = part_gzip ] && ref=part_x_ref
    w=$WORK/wx.h5; [ $name = part_y ] && w=$WORK/wy.h5
    run "logreg_${ref}_np$np" 0 60 mpi $np "$SPMD" logreg --data "$H/$ref.h5" --maxiter 5 --json "$WORK/$ref$np.json" --quiet
    run "logreg_${name}_np$np" 0 60 mpi $np "$SPMD" logreg --data "$H/$name.h5" --maxiter 5 --json "$WORK/$name$np.json" \
      --quiet --hang-timeout 20
    checks=$((checks + 1))
    if [ "$(value "$WORK/$name$np.json")" = "$(value "$WORK/$ref$np.json")" ]; then
      echo "ok   logreg $name on $np rank(s): the objective of the file with every row written"
    else fail "logreg $name on $np rank(s): objective $(value "$WORK/$name$np.json"), written out $(value "$WORK/$ref$np.json")"; fi
    for strategy in pad infinite-pad; do
      for f in $ref $name; do
        run "eval_${f}_${strategy}_np$np" 0 60 mpi $np "$SPMD" eval --data "$H/$f.h5" --model logreg --weights "$w" \
          --strategy $strategy --per-device-batch 100 --predictions "$WORK/${f}_${strategy}_$np.h5" --quiet --hang-timeout 20
      done
      same_bits "eval_${name}_${strategy}_np${np}_same" "$WORK/${ref}_${strategy}_$np.h5" "$WORK/${name}_${strategy}_$np.h5"
    done
  done
done

# Never filled: refused on every rank, by file and dataset, within seconds, nothing written.
NEVER="never\.h5': features dataset 'x' has 5 of its 6 chunks never written, and the file says not to fill them.*fillvalue"
for np in 1 2; do
  refuse "never_logreg_np$np" $np "$NEVER" "$SPMD" logreg --data "$H/never.h5" --json "$OUT/r.json" --weights-out "$OUT/w.h5"
  refuse "never_eval_np$np" $np "$NEVER" "$SPMD" eval --data "$H/never.h5" --model logreg --weights "$WORK/wy.h5" \
    --strategy infinite-pad --predictions "$OUT/p.h5" --json "$OUT/r.json"
done

# --- spmd data info ---------------------------------------------------------------------------
run info_part_x 0 30 "$SPMD" data info "$H/part_x.h5" --json "$WORK/part_x_info.json"
expect_in "data info: unwritten chunks" "note: 3 of 6 chunks never written: their rows read as the fill value 0$"
run info_part_x_json 0 10 py "import json; x=json.load(open('$WORK/part_x_info.json'))['datasets'][0]; assert (x['chunks_total'], x['chunks_written']) == (6, 3), x"
run info_part_y 0 30 "$SPMD" data info "$H/part_y.h5"
expect_in "data info: the fill value of the labels" "note: 3 of 6 chunks never written: their rows read as the fill value 3$"
run info_never 0 30 "$SPMD" data info "$H/never.h5"
expect_in "data info: never filled" "note: 5 of 6 chunks never written: no fill value"
run info_columns 0 30 "$SPMD" data info "$H/columns.h5"
expect_in "data info: column chunks with gzip are slow by nature" \
  "note: slow to read by nature: each compressed chunk \[20000, 1\] holds 20000 rows of a part of each row \(784 chunks to a row\).*h5repack -l x:CHUNK=1337x784 "
run info_rows_gzip 0 30 "$SPMD" data info "$H/rows_gzip.h5"
expect_not_in "data info: row chunks with gzip read fine" "note:"
# The command the note gives, as given: its copy reads fine and holds the same values.
cmd=$(grep -oE "h5repack -l [^ ]+ [^ ]+ rechunked\.h5" "$WORK/info_columns.out")
run rechunk 0 120 bash -c "cd '$WORK' && $cmd"
run info_rechunked 0 30 "$SPMD" data info "$WORK/rechunked.h5"
expect_in "rechunked: whole-row chunks" "layout chunked \[1337, 784\], filters gzip"
expect_not_in "rechunked: no note" "note:"
run rechunked_same 0 30 py "
import h5py
assert (h5py.File('$H/columns.h5')['x'][...] == h5py.File('$WORK/rechunked.h5')['x'][...]).all()"

# --- Values in external raw files (h5py's external=) ---------------------------------------------
# h5py stores the raw files' names as given (relative) and HDF5 looks for them relative to the
# working directory: read from elsewhere, HDF5 fails ("can't read data"), and a raw file shorter
# than its dataset reads as zeros. spmd reads them where HDF5 would, else beside the HDF5 file,
# and refuses a missing or short one on every rank, naming it and where it looked.
run make_external 0 60 env -C "$H" /usr/bin/python3 - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(7)
x = rng.normal(size=(900, 20)).astype(">f8")
y = rng.integers(0, 4, 900).astype(np.int16)
with h5py.File("ext.h5", "w") as h:
    h.create_dataset("x", data=x, external=[("ext_x.bin", 0, h5py.h5f.UNLIMITED)])
    # The labels in two raw files, the second from an offset: every segment must hold its part.
    h.create_dataset("y", data=y, external=[("ext_y0.bin", 0, 600), ("ext_y1.bin", 64, h5py.h5f.UNLIMITED)])
with h5py.File("ext_ref.h5", "w") as h:
    h["x"], h["y"] = x, y
PY
run weights_ext 0 60 "$SPMD" logreg --data "$H/ext_ref.h5" --maxiter 3 --weights-out "$WORK/we.h5" --quiet
for np in 1 2; do
  for f in ext_ref ext; do
    run "eval_${f}_np$np" 0 60 mpi $np "$SPMD" eval --data "$H/$f.h5" --model logreg --weights "$WORK/we.h5" \
      --strategy infinite-pad --per-device-batch 64 --predictions "$WORK/${f}_$np.h5" --quiet --hang-timeout 20
    run "logreg_${f}_np$np" 0 60 mpi $np "$SPMD" logreg --data "$H/$f.h5" --maxiter 5 --json "$WORK/$f$np.json" \
      --quiet --hang-timeout 20
  done
  same_bits "external_beside_np${np}_same" "$WORK/ext_ref_$np.h5" "$WORK/ext_$np.h5"
  checks=$((checks + 1))
  if [ "$(value "$WORK/ext$np.json")" = "$(value "$WORK/ext_ref$np.json")" ]; then
    echo "ok   logreg on external raw files beside the file, $np rank(s): the objective of the contiguous copy"
  else fail "logreg external np$np: $(value "$WORK/ext$np.json") vs $(value "$WORK/ext_ref$np.json")"; fi
done
# From the raw files' folder (HDF5's own rule), and under HDF5_EXTFILE_PREFIX from a copy alone.
run eval_ext_cwd 0 60 env -C "$H" mpirun -np 2 --oversubscribe "$SPMD" eval --data ext.h5 --model logreg \
  --weights "$WORK/we.h5" --strategy infinite-pad --per-device-batch 64 --predictions "$WORK/ext_cwd.h5" --quiet
same_bits external_cwd_same "$WORK/ext_ref_2.h5" "$WORK/ext_cwd.h5"
mkdir -p "$WORK/lone" "$WORK/short"
cp "$H/ext.h5" "$WORK/lone/"
HDF5_EXTFILE_PREFIX=$H run eval_ext_prefix 0 60 mpi 2 "$SPMD" eval --data "$WORK/lone/ext.h5" --model logreg \
  --weights "$WORK/we.h5" --strategy infinite-pad --per-device-batch 64 --predictions "$WORK/ext_prefix.h5" --quiet
same_bits external_prefix_same "$WORK/ext_ref_2.h5" "$WORK/ext_prefix.h5"
run info_ext 0 30 "$SPMD" data info "$H/ext.h5"
expect_in "data info: where the raw files are" "note: values in external raw file '[^']*/ext_x\.bin' \(found beside the HDF5 file\)"
expect_in "data info: several raw files" "note: values in external raw files '[^']*/ext_y0\.bin', '[^']*/ext_y1\.bin'"
# Missing: refused by dataset and raw file. Short (the second labels file cut): refused by size.
cp "$H/ext.h5" "$H/ext_x.bin" "$H/ext_y0.bin" "$WORK/short/"
head -c 100 "$H/ext_y1.bin" > "$WORK/short/ext_y1.bin"
MISSING="lone/ext\.h5': features dataset 'x' keeps its values in raw files of its own \(HDF5 external storage, h5py's external=\), and 'ext_x\.bin' is not at .*HDF5_EXTFILE_PREFIX"
SHORT="short/ext\.h5': labels dataset 'y' keeps its values in raw files of its own .*'ext_y1\.bin' at '[^']*' holds 100 bytes, the dataset needs bytes up to 1264 of it \(HDF5 would read the rest as zeros\)"
for np in 1 2; do
  refuse "ext_missing_eval_np$np" $np "$MISSING" "$SPMD" eval --data "$WORK/lone/ext.h5" --model logreg \
    --weights "$WORK/we.h5" --predictions "$OUT/p.h5" --json "$OUT/r.json"
  refuse "ext_missing_logreg_np$np" $np "$MISSING" "$SPMD" logreg --data "$WORK/lone/ext.h5" --json "$OUT/r.json" \
    --weights-out "$OUT/w.h5"
  refuse "ext_short_eval_np$np" $np "$SHORT" "$SPMD" eval --data "$WORK/short/ext.h5" --model logreg \
    --weights "$WORK/we.h5" --strategy infinite-pad --predictions "$OUT/p.h5" --json "$OUT/r.json"
  refuse "ext_short_logreg_np$np" $np "$SHORT" "$SPMD" logreg --data "$WORK/short/ext.h5" --json "$OUT/r.json"
done
run info_ext_short 0 30 "$SPMD" data info "$WORK/short/ext.h5"
expect_in "data info: a short raw file" "note: values in external raw files, not all readable: 'ext_y1\.bin' at .* holds 100 bytes"

# --- Datasets reached through links (h5py.SoftLink, h5py.ExternalLink) ----------------------------
# A "master" file over per-split files, or aliases inside one file: found by the key rules and
# read as the datasets they lead to; a link that leads nowhere is named, on every rank.
run make_links 0 60 env -C "$H" /usr/bin/python3 - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(9)
x = rng.integers(0, 256, (700, 6, 6), dtype=np.uint8)
y = rng.integers(0, 5, 700).astype(np.int32)
with h5py.File("split.h5", "w") as h:
    h["pix"], h["lab"] = x, y
with h5py.File("master.h5", "w") as h:  # a group of another file
    h["train"] = h5py.ExternalLink("split.h5", "/")
with h5py.File("aliases.h5", "w") as h:  # datasets of another file under other names, and soft links
    h["features"] = h5py.ExternalLink("split.h5", "/pix")
    h["store/y"] = y
    h["labels"] = h5py.SoftLink("/store/y")
with h5py.File("dangling.h5", "w") as h:
    h["x"] = h5py.ExternalLink("gone.h5", "/x")
    h["y"] = y
with h5py.File("links_ref.h5", "w") as h:
    h["x"], h["y"] = x, y
PY
run weights_links 0 60 "$SPMD" logreg --data "$H/links_ref.h5" --maxiter 3 --weights-out "$WORK/wl.h5" --quiet
for f in links_ref master aliases; do
  run "logreg_links_$f" 0 60 mpi 2 "$SPMD" logreg --data "$H/$f.h5" --maxiter 5 --json "$WORK/$f.json" --quiet
  run "eval_links_$f" 0 60 mpi 2 "$SPMD" eval --data "$H/$f.h5" --model logreg --weights "$WORK/wl.h5" \
    --strategy infinite-pad --per-device-batch 64 --predictions "$WORK/links_$f.h5" --quiet
done
expect_in "aliases: the conventional pair through its links" "features 'features', labels 'labels' \(auto: conventional pair"
for f in master aliases; do
  same_bits "links_${f}_same" "$WORK/links_links_ref.h5" "$WORK/links_$f.h5"
  checks=$((checks + 1))
  if [ "$(value "$WORK/$f.json")" = "$(value "$WORK/links_ref.json")" ]; then
    echo "ok   logreg through links ($f): the objective of the datasets themselves"
  else fail "logreg $f: $(value "$WORK/$f.json") vs $(value "$WORK/links_ref.json")"; fi
done
run logreg_links_master_keys 0 60 "$SPMD" logreg --data "$H/master.h5" --maxiter 1 --quiet
expect_in "master: the datasets of the linked group" "features 'train/pix', labels 'train/lab' \(auto: the only features-like"
run info_master 0 30 "$SPMD" data info "$H/master.h5"
expect_in "data info: the linked group's datasets" "^/train/pix +uint8 +\[700, 6, 6\]"
DANGLING="dangling\.h5.*'/x' \(external link to '/x' in 'gone\.h5'"
for np in 1 2; do
  refuse "dangling_auto_np$np" $np "^  /x +external link to '/x' in 'gone\.h5', which is missing" "$SPMD" logreg --data "$H/dangling.h5" --json "$OUT/r.json"
  refuse "dangling_given_np$np" $np "$DANGLING" "$SPMD" eval --data "$H/dangling.h5" --features-key x --labels-key y \
    --model logreg --weights "$WORK/wl.h5" --predictions "$OUT/p.h5"
done
run info_dangling 0 30 "$SPMD" data info "$H/dangling.h5"
expect_in "data info: a link that leads nowhere" "note: link /x leads nowhere \(external link to '/x' in 'gone\.h5'"

# --- Class indices stored as floats (a pandas column, y.astype(float)) ---------------------------
# Read as the integers they hold: logreg's objective and eval's predictions those of the int64
# labels; a label that is no whole number (2.5, NaN, 1e30) refused on every rank naming its row.
run make_float_labels 0 60 /usr/bin/python3 - "$H" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(f"{d}/part_x_ref.h5") as f:
    x, y = f["x"][...], f["y"][...].astype(np.int64)
for name, labels in (("labels_int", y), ("labels_f64", y.astype(np.float64)), ("labels_f32", y.astype(np.float32)[:, None]),
                     ("labels_half", np.where(np.arange(len(y)) == 1717, 2.5, y)),
                     ("labels_nan", np.where(np.arange(len(y)) == 2222, np.nan, y).astype(np.float32)),
                     ("labels_huge", np.where(np.arange(len(y)) == 5, 1e30, y))):
    with h5py.File(f"{d}/{name}.h5", "w") as g:
        g["x"], g["y"] = x, labels
PY
for np in 1 2; do
  for f in labels_int labels_f64 labels_f32; do
    run "logreg_${f}_np$np" 0 60 mpi $np "$SPMD" logreg --data "$H/$f.h5" --maxiter 5 --json "$WORK/$f$np.json" --quiet
    run "eval_${f}_np$np" 0 60 mpi $np "$SPMD" eval --data "$H/$f.h5" --model logreg --weights "$WORK/wx.h5" \
      --strategy infinite-pad --per-device-batch 100 --predictions "$WORK/${f}_$np.h5" --quiet
  done
  for f in labels_f64 labels_f32; do
    checks=$((checks + 1))
    if [ -s "$WORK/$f$np.json" ] && [ "$(value "$WORK/$f$np.json")" = "$(value "$WORK/labels_int$np.json")" ]; then
      echo "ok   logreg $f on $np rank(s): the objective of the int64 labels"
    else fail "logreg $f on $np rank(s): objective $(value "$WORK/$f$np.json"), int64 labels $(value "$WORK/labels_int$np.json")"; fi
    same_bits "eval_${f}_np${np}_same" "$WORK/labels_int_$np.h5" "$WORK/${f}_$np.h5"
  done
  refuse "labels_half_np$np" $np "labels_half\.h5': labels dataset 'y': row 1717 has label 2\.5; float labels must be whole numbers" \
    "$SPMD" logreg --data "$H/labels_half.h5" --json "$OUT/r.json" --weights-out "$OUT/w.h5"
  refuse "labels_nan_np$np" $np "labels_nan\.h5': labels dataset 'y': row 2222 has label nan; float labels must be whole numbers" \
    "$SPMD" eval --data "$H/labels_nan.h5" --model logreg --weights "$WORK/wx.h5" --predictions "$OUT/p.h5"
  refuse "labels_huge_np$np" $np "labels_huge\.h5': labels dataset 'y': row 5 has label 1e\+30; float labels must be whole numbers" \
    "$SPMD" eval --data "$H/labels_huge.h5" --model logreg --weights "$WORK/wx.h5" --predictions "$OUT/p.h5"
done

# --- A file held open for writing (HDF5's file lock) --------------------------------------------
/usr/bin/python3 -c "
import h5py, sys, time
f = h5py.File('$H/locked.h5', 'a')
print('held', flush=True)
time.sleep(300)" >"$WORK/holder.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q held "$WORK/holder.out" && break; sleep 0.1; done
LOCKED="locked\.h5': HDF5 could not lock the file \(errno 11, .*another process has it open for writing.*HDF5_USE_FILE_LOCKING=FALSE.*only when nothing will write the file"
refuse lock_info 1 "$LOCKED" "$SPMD" data info "$H/locked.h5" --json "$OUT/i.json"
for np in 1 2; do
  refuse "lock_logreg_np$np" $np "$LOCKED" "$SPMD" logreg --data "$H/locked.h5" --json "$OUT/r.json" --weights-out "$OUT/w.h5"
  refuse "lock_eval_np$np" $np "$LOCKED" "$SPMD" eval --data "$H/locked.h5" --model logreg --weights "$WORK/wx.h5" \
    --predictions "$OUT/p.h5" --json "$OUT/r.json"
done
# What the message offers: without locks the run reads the file (nothing writes it here).
HDF5_USE_FILE_LOCKING=FALSE run lock_off_logreg 0 60 mpi 2 "$SPMD" logreg --data "$H/locked.h5" --maxiter 2 --quiet
HDF5_USE_FILE_LOCKING=FALSE run lock_off_eval 0 60 mpi 2 "$SPMD" eval --data "$H/locked.h5" --model logreg \
  --weights "$WORK/wx.h5" --quiet
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
finish
