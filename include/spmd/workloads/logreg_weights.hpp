#pragma once
// The logreg weights file: HDF5 with dataset "W" [features, classes], with an intercept
// also "b" [classes] (logits = x W + b), and attributes (model = "logreg", fit_intercept
// 0/1, solver status, iterations, value, data file, input_scale, precision). W and b are
// float32, or float64 as solved when the solve was (precision "float64"); either is read
// (eval predicts in float32). Written by `spmd logreg --weights-out`, read by `spmd eval
// --model logreg --weights`.
#include <string>
#include <vector>

#include "spmd/models/logreg_parameters.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::data {
class OutputSet;
}

namespace spmd::workloads {

struct LogregWeightsInfo {
  std::string status;
  long long iterations = 0;
  double value = 0;
  std::string data;
  std::string input_scale;  // --input-scale as given ("auto", "none", "1/255"): how the features were scaled
  std::string precision = "float32";  // the solve's arithmetic (models::to_string(LogregPrecision))
  // precision float64: W and b as solved, written as float64 instead of the parameters'
  // float32 values (same shapes; b empty without an intercept).
  std::vector<double> W64, bias64;
  std::string penalty = "l2";  // LogregOptions::penalty, and the strengths the objective added
  double l1 = 0, l2 = 0;
};

// Collective; rank 0 writes the file to its temporary and hands it to `outputs` (published
// with the run's other outputs); errors agreed on every rank.
void write_logreg_weights(const runtime::Context& ctx, const std::string& path, const models::LogregParameters& w,
                          const LogregWeightsInfo& info, data::OutputSet& outputs);

// Collective; rank 0 reads and validates, everyone gets the weights. A missing file, a
// file that is not HDF5, a missing "W", a W that is not 2-D, a "b" that is not [classes] or
// a non-finite value ends every rank with a message naming the file.
models::LogregParameters read_logreg_weights(const runtime::Context& ctx, const std::string& path);

// A weights file as the starting point of a solve (--init-weights): W and b in double, as
// stored (a float64 file's bits; a float32 file's values widened). Checks as above.
struct LogregStart {
  std::vector<double> W, bias;  // bias empty: the file has no intercept
  int features = 0, classes = 0;
};
LogregStart read_logreg_start(const runtime::Context& ctx, const std::string& path);

}  // namespace spmd::workloads
