#pragma once
// What one rank evaluates, apart from the loop that evaluates it (eval.hpp), for the files
// that only read it (the predictions file, the memory estimate).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/runtime/large_pages.hpp"

namespace spmd::workloads {

// A rank's share of the evaluation. Its labels and sizes are in memory (4 bytes per row);
// its features stay in the file, and every pass streams them in blocks through
// prefetch_to_device (file_row_blocks.hpp): a rank holds a few blocks, never its shard.
struct EvalShard {
  data::LoadedShard shard;  // labels [rows] of the evaluated rows, sizes, classes; no features
  std::string path;                    // the file and the dataset the passes stream
  std::string features_key;
  data::DatasetShape features_shape;   // as probed: element type, sample shape
  std::int64_t filtered = 0;  // rows this rank removed with --drop-label
  // This rank's rows of the file are [shard.first_row, shard.first_row + file_rows). With
  // --drop-label, kept[i] is evaluated row i's index among them and file_labels holds every
  // file row's label; without, both are empty (row i is file row i).
  std::int64_t file_rows = 0;
  std::vector<std::int64_t> kept;
  std::vector<std::int32_t> file_labels;
  std::int64_t file_row_of(std::int64_t row) const { return kept.empty() ? row : kept[static_cast<std::size_t>(row)]; }
  // with_features_in_memory: the evaluated rows' features as stored ([rows, sample_size] of
  // features_shape.features_type), which passes then read instead of the file.
  bool features_in_memory = false;
  runtime::LargeVector<std::byte> features;
};

}  // namespace spmd::workloads
