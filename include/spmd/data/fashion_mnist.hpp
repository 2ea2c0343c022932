#pragma once
// Fashion-MNIST from Debian's dataset-fashion-mnist package (gzip-compressed IDX files)
// into SPMD Kit's HDF5 layout:
//   <out>/train.h5, <out>/test.h5:  images uint8 [N, 28, 28, 1] (NHWC, raw 0..255),
//                                   labels int32 [N] in [0, 10)
// with attributes source (the IDX file), classes = 10 and class_names.
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::data {

// Where Debian installs the files (`dpkg -L dataset-fashion-mnist`).
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The folder holding train-images-idx3-ubyte.gz according to dpkg's file list for
// dataset-fashion-mnist (what `dpkg -L` prints); kDebianFashionMnistDir when the package
// database does not say.
std::string default_fashion_mnist_dir();

// One IDX pair, decoded and checked.
struct IdxImages {
  std::int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // [count, rows, cols], row-major
};
// Reads a gzip-compressed (or plain) IDX3 ubyte file; checks the magic number 2051, the
// dimensions and that the payload is complete with nothing after it. Throws spmd::Error.
IdxImages read_idx_images(const std::string& path);
// IDX1 ubyte labels (magic 2049). Throws spmd::Error.
std::vector<std::uint8_t> read_idx_labels(const std::string& path);

struct FashionMnistSummary {
  std::string train_path, test_path;  // the written HDF5 files
  std::int64_t train_rows = 0, test_rows = 0;
};

// Converts {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz in source_dir into
// out_dir/train.h5 and out_dir/test.h5 (out_dir is created; each file is written
// atomically). Checks: files present (else: apt-get install dataset-fashion-mnist), magic
// numbers, 28x28 images, equal image and label counts, labels < 10, no truncation.
// Serial; in an MPI job call it on one rank. Throws spmd::Error.
FashionMnistSummary convert_fashion_mnist(const std::string& source_dir, const std::string& out_dir);

}  // namespace spmd::data
