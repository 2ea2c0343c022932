#include "spmd/workloads/logreg_weights.hpp"

#include <cmath>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

namespace {

template <class T>
void require_finite(const std::vector<T>& values, std::int64_t columns, const std::string& path, const char* name) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    const auto c = static_cast<std::size_t>(columns);
    const std::string at = columns > 0 ? std::to_string(i / c) + ", " + std::to_string(i % c) : std::to_string(i);
    throw Error("logreg weights '" + path + "': " + name + "[" + at + "] is a non-finite value (" +
                std::to_string(static_cast<double>(values[i])) + "); the weights must be finite (a diverged or corrupt solve?)");
  }
}

}  // namespace

void write_logreg_weights(const runtime::Context& ctx, const std::string& path, const models::LogregParameters& w,
                          const LogregWeightsInfo& info, data::OutputSet& outputs) {
  data::write_on_root(ctx, path, [&](data::AtomicH5Writer& out) {
    if (info.precision == "float64") {
      out.write("W", info.W64, {w.features, w.classes});
      if (w.has_intercept()) out.write("b", info.bias64, {w.classes});
    } else {
      out.write("W", w.W, {w.features, w.classes});
      if (w.has_intercept()) out.write("b", w.bias, {w.classes});
    }
    out.set_attribute_string("/", "precision", info.precision);
    out.set_attribute_string("/", "model", "logreg");
    out.set_attribute_int("/", "fit_intercept", w.has_intercept() ? 1 : 0);
    out.set_attribute_string("/", "status", info.status);
    out.set_attribute_int("/", "iterations", info.iterations);
    out.set_attribute_double("/", "value", info.value);
    out.set_attribute_string("/", "data", info.data);
    out.set_attribute_string("/", "input_scale", info.input_scale);
    out.set_attribute_string("/", "penalty", info.penalty);
    out.set_attribute_double("/", "l1", info.l1);
    out.set_attribute_double("/", "l2", info.l2);
  }, &outputs);
}

namespace {

// Rank 0 reads and checks, everyone gets W [features, classes] and b (empty: none) as T.
template <class T>
void read_weights(const runtime::Context& ctx, const std::string& path, std::vector<T>& W, std::vector<T>& bias,
                  int& features, int& classes) {
  std::int64_t dims[3] = {0, 0, 0};  // features, classes, intercept (0/1)
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path, "the logreg weights (--weights)");
    if (!in.has_dataset("/W"))
      throw Error("logreg weights '" + path + "': no dataset 'W' (is this a file written by spmd logreg --weights-out?)");
    const auto shape = in.shape("/W");
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 2)
      throw Error("logreg weights '" + path + "': dataset 'W' must be 2-D [features, classes >= 2], has shape " +
                  std::to_string(shape.size()) + "-D");
    W = in.read<T>("/W");
    require_finite(W, shape[1], path, "W");
    if (in.has_dataset("/b")) {
      const auto b_shape = in.shape("/b");
      if (b_shape.size() != 1 || b_shape[0] != shape[1]) {
        // scikit-learn's coef_ is [classes, features]: written as it is, b matches W's rows.
        const bool transposed = b_shape.size() == 1 && b_shape[0] == shape[0];
        throw Error("logreg weights '" + path + "': the intercept 'b' must be [classes] = [" + std::to_string(shape[1]) +
                    "] like W's columns, has shape " + data::format_shape(b_shape) +
                    (transposed ? std::string(": W looks transposed (W is [features, classes]; scikit-learn's coef_ is "
                                              "[classes, features]: write coef_.T)")
                                : std::string()));
      }
      bias = in.read<T>("/b");
      require_finite(bias, 0, path, "b");
      dims[2] = 1;
    }
    dims[0] = shape[0];
    dims[1] = shape[1];
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(dims, 3));
  runtime::broadcast(ctx, W, 0);
  if (dims[2]) runtime::broadcast(ctx, bias, 0);
  features = static_cast<int>(dims[0]);
  classes = static_cast<int>(dims[1]);
}

}  // namespace

models::LogregParameters read_logreg_weights(const runtime::Context& ctx, const std::string& path) {
  models::LogregParameters w;
  read_weights(ctx, path, w.W, w.bias, w.features, w.classes);
  return w;
}

LogregStart read_logreg_start(const runtime::Context& ctx, const std::string& path) {
  LogregStart start;
  read_weights(ctx, path, start.W, start.bias, start.features, start.classes);
  return start;
}

}  // namespace spmd::workloads
