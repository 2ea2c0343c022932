#pragma once
// `spmd data info FILE`: what an HDF5 file holds. Serial (one process).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/storage.hpp"

namespace spmd::data {

struct AttributeDescription {
  std::string name;
  std::string type;   // describe_hdf5_type: "int64", "float64", "string", ...
  std::string value;  // rendered: text as is, numbers as "1" or "[0.5, 0.5]"
  nlohmann::json json;  // the same, typed: string, number or array of numbers
};

// Counts of each value of a 1-D integer dataset (a label column).
struct LabelHistogram {
  std::int64_t min = 0, max = 0;
  std::int64_t distinct = 0;
  bool distinct_at_least = false;  // more distinct values than were tracked: `distinct` is a lower bound
  // (value, count) in increasing value; empty when `distinct` exceeds kMaxHistogramValues.
  std::vector<std::pair<std::int64_t, std::int64_t>> counts;
};
inline constexpr std::int64_t kMaxHistogramValues = 1024;

struct DatasetDescription {
  std::string name;                // absolute: "/images"
  std::vector<std::int64_t> shape;  // {} for a scalar
  std::string dtype;               // describe_hdf5_type
  std::int64_t bytes = 0;          // storage size on disk (after compression)
  std::vector<AttributeDescription> attributes;
  // For every 1-D integer dataset (labels, y, ...).
  std::optional<LabelHistogram> histogram;
  StorageInfo storage;  // layout, chunks, filters
  // What spmd can use it as: "features (logreg, eval; CNN: ensemble, eval --model cnn)",
  // "labels", or "not usable: <why>".
  std::string usable;
  // Unwritten chunks, and chunkings slow to read by nature with their fix (storage_notes).
  std::vector<std::string> notes;
};

struct FileDescription {
  std::string path;
  std::int64_t file_bytes = 0;
  std::vector<AttributeDescription> attributes;  // of the file (root group)
  std::vector<DatasetDescription> datasets;      // recursively, sorted by name
  std::vector<BrokenLink> broken_links;          // soft and external links to nothing
  // Groups holding a sparse matrix (data/sparse_matrix.hpp) or an AnnData categorical column:
  // {group, what it is: "CSR [...]" / "categorical, 7 categories: B, T, ..." / "not usable: why"}.
  std::vector<std::pair<std::string, std::string>> groups;
};

// Throws spmd::Error for a missing or non-HDF5 file.
FileDescription describe_file(const std::string& path);

// {"path", "file_bytes", "attributes": {name: value}, "broken_links": [{"name", "target"}],
//  "datasets": [{"name", "shape",
//  "dtype", "bytes", "layout", "chunk", "filters", "usable", "attributes", "chunks_total",
//  "chunks_written", "notes": [text],
//  "histogram": {"min", "max", "distinct", "counts": {"0": 1000, ...}}}]}
nlohmann::json to_json(const FileDescription& description);

// Human-readable text (what `spmd data info` prints): one line per dataset (dtype, shape,
// size, layout and chunks, filters, what it can be used as, then its notes as "note: ..."
// lines), then histograms.
std::string to_text(const FileDescription& description);

}  // namespace spmd::data
