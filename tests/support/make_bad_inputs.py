#!/usr/bin/python3
"""Writes the malformed inputs of the reliability tests (tests/cli/bad_inputs.sh) into a folder.

Two families, each a good file and one file per defect, so a test changes one thing only:
  img_*.h5  the image layout of spmd eval (zero, cnn) and spmd ensemble:
            images [N, 28, 28, 1] (uint8, or float32/float64 in [0, 1]), labels int32 [N] in [0, 10)
  tab_*.h5  the tabular layout of spmd logreg and spmd eval --model logreg:
            X float32/float64 [N, 4], y int32 [N] in [0, 3)
  weights_*.h5  logreg weights files (dataset W [features, classes]) that fit or do not fit tab_*
                (weights_sklearn: scikit-learn's coef_ [classes, features] and intercept_).
  ck_*.h5   (only when a checkpoint of spmd ensemble is given) copies of it that
            another model shape wrote, with a non-finite parameter, or without the parameters.
Defects are placed in a row (BAD_ROW) that lies on the last rank under 2 or 3 ranks (eval's
split), so the message must come from a rank other than 0.
Usage: make_bad_inputs.py OUT_DIR [ENSEMBLE_CHECKPOINT]
"""
import os
import sys

import h5py
import numpy as np

ROWS = 37      # not divisible by 2, 3, 4 or 6
BAD_ROW = 33   # on the last rank for 2 and 3 ranks
IMG_CLASSES = 10
TAB_FEATURES, TAB_CLASSES = 4, 3


def write(path, datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f.create_dataset(name, data=value)


def images(rows, dtype=np.uint8, side=(28, 28, 1), seed=0):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(rows,) + side, dtype=np.uint8)
    return pixels if dtype == np.uint8 else (pixels / 255.0).astype(dtype)


def labels(rows, classes, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=rows, dtype=np.int32)


def tabular(rows, dtype=np.float32, seed=2):
    return np.random.default_rng(seed).normal(size=(rows, TAB_FEATURES)).astype(dtype)


def with_value(array, value):
    out = array.copy()
    out.reshape(out.shape[0], -1)[BAD_ROW, 1] = value
    return out


def with_label(array, value):
    out = array.copy()
    out[BAD_ROW] = value
    return out


def image_family(out):
    x, y = images(ROWS), labels(ROWS, IMG_CLASSES)
    files = {
        "img_good": {"images": x, "labels": y},
        "img_rows4": {"images": images(4), "labels": labels(4, IMG_CLASSES)},
        "img_no_labels": {"images": x},
        "img_rank1": {"images": x.reshape(-1), "labels": y},
        "img_n_mismatch": {"images": x, "labels": y[:-1]},
        "img_empty": {"images": x[:0], "labels": y[:0]},
        "img_label_neg": {"images": x, "labels": with_label(y, -1)},
        "img_label_big": {"images": x, "labels": with_label(y, IMG_CLASSES)},
        "img_32x32": {"images": images(ROWS, side=(32, 32, 1)), "labels": y},
        "img_28x28x3": {"images": images(ROWS, side=(28, 28, 3)), "labels": y},
        # Not numbers: fixed-length strings where features / labels should be.
        "img_string_features": {"images": np.full((ROWS, 28, 28, 1), b"x", dtype="S1"), "labels": y},
        "img_string_labels": {"images": x, "labels": np.full(ROWS, b"cat", dtype="S3")},
        "img_labels_2col": {"images": x, "labels": np.stack([y, y], axis=1)},
        "img_label_huge": {"images": x, "labels": with_label(y.astype(np.int64), 10**9)},
    }
    for dtype, tag in ((np.float32, "f32"), (np.float64, "f64")):
        xf = images(ROWS, dtype)
        files[f"img_good_{tag}"] = {"images": xf, "labels": y}
        files[f"img_nan_{tag}"] = {"images": with_value(xf, np.nan), "labels": y}
        files[f"img_inf_{tag}"] = {"images": with_value(xf, np.inf), "labels": y}
    for name, datasets in files.items():
        write(os.path.join(out, name + ".h5"), datasets)
    # A bigger valid file cut in two: the superblock is intact, the data is not all there.
    big = os.path.join(out, "img_big.h5")
    write(big, {"images": images(2000), "labels": labels(2000, IMG_CLASSES)})
    with open(big, "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "img_truncated.h5"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    with open(os.path.join(out, "img_truncated_header.h5"), "wb") as f:
        f.write(whole[:600])


def tabular_family(out):
    x, y = tabular(ROWS), labels(ROWS, TAB_CLASSES)
    files = {
        "tab_good": {"X": x, "y": y},
        "tab_rows4": {"X": tabular(4), "y": np.arange(4, dtype=np.int32) % TAB_CLASSES},
        "tab_no_y": {"X": x},
        "tab_rank1": {"X": x.reshape(-1), "y": y},
        "tab_n_mismatch": {"X": x, "y": y[:-1]},
        "tab_empty": {"X": x[:0], "y": y[:0]},
        "tab_label_neg": {"X": x, "y": with_label(y, -1)},
        "tab_label_big": {"X": x, "y": with_label(y, TAB_CLASSES)},
        "tab_string_features": {"X": np.full(x.shape, b"x", dtype="S1"), "y": y},
        "tab_string_labels": {"X": x, "y": np.full(ROWS, b"cat", dtype="S3")},
        "tab_float_labels": {"X": x, "y": y.astype(np.float32) + np.float32(0.5)},  # whole-number floats are read
        "tab_labels_2col": {"X": x, "y": np.stack([y, y], axis=1)},
        "tab_label_huge": {"X": x, "y": with_label(y.astype(np.int64), 10**9)},
    }
    for dtype, tag in ((np.float32, "f32"), (np.float64, "f64")):
        xf = tabular(ROWS, dtype)
        files[f"tab_nan_{tag}"] = {"X": with_value(xf, np.nan), "y": y}
        files[f"tab_inf_{tag}"] = {"X": with_value(xf, -np.inf), "y": y}
    for name, datasets in files.items():
        write(os.path.join(out, name + ".h5"), datasets)
    # Compressed with LZF, which h5py carries itself but an HDF5 without the plugin cannot read.
    for name, key, data, lab_key, lab in (("tab_lzf", "X", x, "y", y),
                                          ("img_lzf", "images", images(ROWS), "labels", labels(ROWS, IMG_CLASSES))):
        with h5py.File(os.path.join(out, name + ".h5"), "w") as f:
            f.create_dataset(key, data=data, compression="lzf", chunks=True)
            f.create_dataset(lab_key, data=lab)
    w = np.random.default_rng(3).normal(size=(TAB_FEATURES, TAB_CLASSES)).astype(np.float32)
    write(os.path.join(out, "weights_good.h5"), {"W": w})
    write(os.path.join(out, "weights_wrong_features.h5"),
          {"W": np.zeros((TAB_FEATURES + 1, TAB_CLASSES), np.float32)})
    write(os.path.join(out, "weights_1d.h5"), {"W": w.reshape(-1)})
    w_nan = w.copy()
    w_nan[1, 2] = np.nan
    write(os.path.join(out, "weights_nan.h5"), {"W": w_nan})
    # scikit-learn's coef_ and intercept_ written as they are: W [classes, features].
    write(os.path.join(out, "weights_sklearn.h5"),
          {"W": np.ascontiguousarray(w.T), "b": np.zeros(TAB_CLASSES, np.float64)})


def checkpoint_family(out, checkpoint):
    def variant(name, change):
        path = os.path.join(out, name + ".h5")
        with h5py.File(checkpoint, "r") as src, h5py.File(path, "w") as dst:
            for key, value in src.attrs.items():
                dst.attrs[key] = value
            datasets = {}  # every dataset by its path ("params", "history/epoch", ...)
            src.visititems(lambda key, obj: datasets.update({key: obj[()]}) if isinstance(obj, h5py.Dataset) else None)
            change(datasets, dst.attrs)
            for key, value in datasets.items():
                dst.create_dataset(key, data=value)

    def other_shape(datasets, attrs):  # a model with fewer parameters
        for key in ("params", "momentum"):
            datasets[key] = datasets[key][:, :1000]
        attrs["param_count"] = 1000

    def non_finite(datasets, attrs):
        datasets["params"][0, 5] = np.nan

    variant("ck_other_shape", other_shape)
    variant("ck_nan", non_finite)
    variant("ck_no_params", lambda datasets, attrs: datasets.pop("params"))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make_bad_inputs.py OUT_DIR [ENSEMBLE_CHECKPOINT]")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) == 3:
        checkpoint_family(out, sys.argv[2])
        return
    image_family(out)
    tabular_family(out)
    with open(os.path.join(out, "not_hdf5.h5"), "w") as f:
        f.write("this is a text file, not HDF5\n" * 10)


if __name__ == "__main__":
    main()
