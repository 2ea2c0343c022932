#include "spmd/workloads/logreg_weights.hpp"

#include <cmath>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

void write_logreg_weights(const runtime::Context& ctx, const std::string& path, const LogregWeights& w,
                          const LogregWeightsInfo& info) {
  data::write_on_root(ctx, path, [&](data::AtomicH5Writer& out) {
    out.write("W", w.W, {w.features, w.classes});
    out.set_attribute_string("/", "model", "logreg");
    out.set_attribute_string("/", "status", info.status);
    out.set_attribute_int("/", "iterations", info.iterations);
    out.set_attribute_double("/", "value", info.value);
    out.set_attribute_string("/", "data", info.data);
  });
}

LogregWeights read_logreg_weights(const runtime::Context& ctx, const std::string& path) {
  LogregWeights w;
  std::int64_t dims[2] = {0, 0};
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path);
    if (!in.has_dataset("/W"))
      throw Error("logreg weights '" + path + "': no dataset 'W' (is this a file written by spmd logreg --weights-out?)");
    const auto shape = in.shape("/W");
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 2)
      throw Error("logreg weights '" + path + "': dataset 'W' must be 2-D [features, classes >= 2], has shape " +
                  std::to_string(shape.size()) + "-D");
    w.W = in.read<float>("/W");
    for (std::size_t i = 0; i < w.W.size(); ++i)
      if (!std::isfinite(w.W[i]))
        throw Error("logreg weights '" + path + "': W[" + std::to_string(i / static_cast<std::size_t>(shape[1])) + ", " +
                    std::to_string(i % static_cast<std::size_t>(shape[1])) + "] is a non-finite value (" + std::to_string(w.W[i]) +
                    "); the weights must be finite (a diverged or corrupt solve?)");
    dims[0] = shape[0];
    dims[1] = shape[1];
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(dims, 2));
  runtime::broadcast(ctx, w.W, 0);
  w.features = static_cast<int>(dims[0]);
  w.classes = static_cast<int>(dims[1]);
  return w;
}

}  // namespace spmd::workloads
