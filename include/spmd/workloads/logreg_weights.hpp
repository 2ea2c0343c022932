#pragma once
// The logreg weights file: HDF5 with dataset "W" float32 [features, classes] and
// attributes (model = "logreg", solver status, iterations, value, data file). Written by
// `spmd logreg --weights-out`, read by `spmd eval --model logreg --weights`.
#include <string>
#include <vector>

#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

struct LogregWeights {
  std::vector<float> W;  // [features, classes] row-major
  int features = 0;
  int classes = 0;
};

struct LogregWeightsInfo {
  std::string status;
  long long iterations = 0;
  double value = 0;
  std::string data;
};

// Collective; rank 0 writes atomically (temp file + rename), errors agreed on every rank.
void write_logreg_weights(const runtime::Context& ctx, const std::string& path, const LogregWeights& w,
                          const LogregWeightsInfo& info);

// Collective; rank 0 reads and validates, everyone gets the weights. A missing file, a
// file that is not HDF5, a missing "W" or a W that is not 2-D float ends every rank with a
// message naming the file.
LogregWeights read_logreg_weights(const runtime::Context& ctx, const std::string& path);

}  // namespace spmd::workloads
