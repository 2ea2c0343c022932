// libFuzzer target: opening a data file, as `spmd data info`, `eval`, `logreg` and `ensemble`
// do. Each input is an HDF5 file: describe_file (data info) walks it, resolve_dataset_keys
// finds its features and labels, probe_feature_source tells a dense dataset from a CSR group,
// and the first rows are read as a run reads them (ShardReader and load_shard through
// MPI-IO for a dense dataset, SerialCsrReader and load_label_column for a sparse one), with
// the checks of linked files (external links, external raw files, virtual sources) on the way,
// after the walk in a child process that start-up makes (h5_metadata_probe.hpp).
//
// A finding is anything other than a clean spmd::Error: a crash (in spmd or in the HDF5
// library under it), a sanitizer report, an exception of another type, a run past
// libFuzzer's -timeout, or an allocation above -malloc_limit_mb (a file that claims 2^40
// rows must not make a reader reserve them). MPI runs as a singleton (MPI_COMM_SELF).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input_file.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/dataset_keys.hpp"
#include "spmd/data/describe.hpp"
#include "spmd/data/feature_source.hpp"
#include "spmd/data/h5_metadata_probe.hpp"
#include "spmd/data/label_column.hpp"
#include "spmd/data/serial_csr_reader.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"

namespace {

constexpr std::int64_t kMaxValuesRead = std::int64_t{1} << 18;  // per read: what a first batch holds
constexpr std::int64_t kRowsRead = 8;

std::unique_ptr<spmd::runtime::Context> g_context;

const std::string& input_path() {
  static const std::string path = spmd::fuzz::input_file_path("h5", ".h5");
  return path;
}

void write_input(const std::uint8_t* data, std::size_t size) { spmd::fuzz::write_input_file(input_path(), data, size); }

void read_dense(const spmd::runtime::Context& ctx, const std::string& path, const spmd::data::DatasetKeys& keys,
                const spmd::data::DatasetShape& shape) {
  const std::int64_t rows = std::min(shape.rows, kRowsRead);
  if (shape.sample_size > 0 && rows * shape.sample_size > kMaxValuesRead) return;
  spmd::data::ShardReader reader(ctx, path, keys);
  std::vector<float> features(static_cast<std::size_t>(rows * shape.sample_size));
  reader.read_features(0, rows, features);
  if (!keys.labels.empty()) {
    std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
    reader.read_labels(0, rows, labels);
  }
  (void)spmd::data::load_shard(ctx, path, keys, shape.rows - rows, rows, 0);
}

void read_sparse(const spmd::runtime::Context& ctx, const std::string& path, const spmd::data::DatasetKeys& keys,
                 const spmd::data::SparseMatrixInfo& info) {
  const std::int64_t rows = std::min(info.rows, kRowsRead);
  if (info.columns > 0 && rows * info.columns > kMaxValuesRead) return;
  spmd::data::SerialCsrReader reader(path, info);
  std::vector<float> dense(static_cast<std::size_t>(rows * info.columns));
  reader.read_dense(info.rows - rows, rows, dense.data());
  if (!keys.labels.empty()) (void)spmd::data::load_label_column(ctx, path, keys.labels, info.rows, 0, rows, 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  spmd::runtime::ContextOptions options;
  options.hang_timeout_s = 0;  // libFuzzer's -timeout is the watchdog here
  g_context = std::make_unique<spmd::runtime::Context>(MPI_COMM_SELF, options);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_input(data, size);
  const std::string& path = input_path();
  // What the node's first rank does before any rank opens an input: a file that crashes the
  // HDF5 library in the child is refused there (the child's ASan report is its exit status).
  try {
    spmd::data::require_hdf5_walk_survives(path, 10);
  } catch (const spmd::Error&) {
    return 0;
  }
  try {
    (void)spmd::data::to_text(spmd::data::describe_file(path));
  } catch (const spmd::Error&) {
  }
  try {
    const auto keys = spmd::data::resolve_dataset_keys(path, {}).keys;
    const auto source = spmd::data::probe_feature_source(path, keys);
    if (source.sparse)
      read_sparse(*g_context, path, keys, *source.sparse);
    else
      read_dense(*g_context, path, keys, source.shape);
  } catch (const spmd::Error&) {
  }
  return 0;
}
