#include "spmd/workloads/checkpoint.hpp"

#include <cmath>
#include <sstream>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

namespace {

constexpr const char* kConfigAttribute = "cnn_config";

// The config a checkpoint holds; one written before configs were stored holds the default.
models::CnnConfig stored_config(const data::H5Reader& in, const std::string& what) {
  if (!in.has_attribute("/", kConfigAttribute)) return models::CnnConfig::seed_default();
  return models::CnnConfig::from_json(in.attribute_string("/", kConfigAttribute), what);
}

// [members][P] on rank 0 from every rank's local members (global member order).
std::vector<float> gather_members(const runtime::Context& ctx, const std::vector<models::CnnParams>& local) {
  runtime::PerDevice<std::span<const float>> spans;
  for (const auto& p : local) spans.emplace_back(p.data(), p.size());
  return runtime::gather(ctx, spans);
}

void scatter_members(const runtime::Context& ctx, const std::vector<float>& all, std::vector<models::CnnParams>& local) {
  runtime::PerDevice<std::span<float>> spans;
  for (auto& p : local) spans.emplace_back(p.data(), p.size());
  runtime::scatter(ctx, std::span<const float>(all), spans);
}

std::string first_difference(const std::string& want, const std::string& have) {
  std::istringstream a(want), b(have);
  std::string la, lb;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) return "";
    if (!ga) la = "(nothing)";
    if (!gb) lb = "(nothing)";
    if (la != lb) return "this run has '" + la + "', the checkpoint has '" + lb + "'";
  }
}
}  // namespace

void write_checkpoint(const runtime::Context& ctx, const std::string& path, const CheckpointState& st,
                      const std::vector<models::CnnParams>& params, const std::vector<models::CnnParams>& momentum) {
  const models::CnnLayout& layout = params.front().layout();
  for (std::size_t i = 0; i < params.size(); ++i) {
    models::require_geometry(params[i], layout, "write_checkpoint");
    models::require_geometry(momentum.at(i), layout, "write_checkpoint (momentum)");
  }
  const std::size_t P = layout.param_count();
  const auto p = gather_members(ctx, params);
  const auto m = gather_members(ctx, momentum);
  const std::int64_t members = ctx.total_devices();
  data::write_on_root(ctx, path, [&](data::AtomicH5Writer& w) {
    w.write("params", p, {members, static_cast<std::int64_t>(P)});
    w.write("momentum", m, {members, static_cast<std::int64_t>(P)});
    w.set_attribute_string("/", "model", "cnn-ensemble");
    w.set_attribute_string("/", kConfigAttribute, layout.config().to_json());
    w.set_attribute_int("/", "members", members);
    w.set_attribute_int("/", "param_count", static_cast<std::int64_t>(P));
    w.set_attribute_int("/", "epochs_done", st.epochs_done);
    w.set_attribute_int("/", "step", st.step);
    w.set_attribute_double("/", "train_loss_sum", st.train_loss_sum);
    w.set_attribute_int("/", "train_correct", st.train_correct);
    w.set_attribute_int("/", "train_seen", st.train_seen);
    w.set_attribute_double("/", "train_seconds", st.train_seconds);
    w.set_attribute_string("/", "seed", std::to_string(st.seed));
    w.set_attribute_string("/", "options", st.options);
    w.set_attribute_string("/", "history", st.history);
  });
}

CheckpointState read_checkpoint(const runtime::Context& ctx, const std::string& path, const std::string& expected_options,
                                std::vector<models::CnnParams>& params, std::vector<models::CnnParams>& momentum) {
  CheckpointState st;
  const models::CnnLayout& layout = params.front().layout();
  const std::size_t P = layout.param_count();
  std::vector<float> p, m;
  std::int64_t ints[5] = {0, 0, 0, 0, 0};
  double doubles[2] = {0, 0};
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path);
    const std::string what = "checkpoint '" + path + "'";
    if (!in.has_attribute("/", "model") || in.attribute_string("/", "model") != "cnn-ensemble")
      throw Error(what + " is not an spmd ensemble checkpoint (no model = cnn-ensemble attribute)");
    const auto members = in.attribute_int("/", "members");
    const auto count = in.attribute_int("/", "param_count");
    const models::CnnConfig config = stored_config(in, what);
    if (config != layout.config())
      throw Error(what + " holds a CNN of " + config.describe() + "; this run's CNN is " + layout.config().describe());
    if (count != static_cast<std::int64_t>(P))
      throw Error(what + " holds a model of " + std::to_string(count) + " parameters; this CNN has " + std::to_string(P));
    if (members != ctx.total_devices())
      throw Error(what + " holds " + std::to_string(members) + " members; this run has " +
                  std::to_string(ctx.total_devices()) + " (ranks x devices). Resume with the same total of devices.");
    const std::string stored = in.attribute_string("/", "options");
    const std::string diff = first_difference(expected_options, stored);
    if (!diff.empty()) throw Error(what + " comes from a run with other options: " + diff);
    p = in.read<float>("/params", {members, count});
    m = in.read<float>("/momentum", {members, count});
    ints[0] = in.attribute_int("/", "epochs_done");
    ints[1] = in.attribute_int("/", "step");
    ints[2] = in.attribute_int("/", "train_correct");
    ints[3] = in.attribute_int("/", "train_seen");
    ints[4] = static_cast<std::int64_t>(std::stoull(in.attribute_string("/", "seed")));
    doubles[0] = in.attribute_double("/", "train_loss_sum");
    doubles[1] = in.attribute_double("/", "train_seconds");
    st.options = stored;
    st.history = in.attribute_string("/", "history");
    for (float v : p)
      if (!std::isfinite(v)) throw Error(what + ": parameters hold NaN/Inf (corrupt checkpoint)");
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(ints, 5));
  runtime::broadcast(ctx, std::span<double>(doubles, 2));
  runtime::broadcast(ctx, st.options);
  runtime::broadcast(ctx, st.history);
  scatter_members(ctx, p, params);
  scatter_members(ctx, m, momentum);
  st.members = ctx.total_devices();
  st.epochs_done = static_cast<int>(ints[0]);
  st.step = ints[1];
  st.train_correct = ints[2];
  st.train_seen = ints[3];
  st.seed = static_cast<std::uint64_t>(ints[4]);
  st.train_loss_sum = doubles[0];
  st.train_seconds = doubles[1];
  return st;
}

CheckpointParams read_checkpoint_params(const runtime::Context& ctx, const std::string& path) {
  std::vector<float> all;
  std::string config_text;
  std::int64_t members = 0;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path);
    if (!in.has_attribute("/", "model") || in.attribute_string("/", "model") != "cnn-ensemble")
      throw Error("--weights '" + path + "' is not an spmd ensemble checkpoint (no model = cnn-ensemble attribute)");
    const models::CnnConfig config = stored_config(in, "--weights '" + path + "'");
    const auto P = static_cast<std::int64_t>(models::CnnLayout(config).param_count());
    const auto shape = in.shape("/params");
    if (shape.size() != 2 || shape[1] != P || shape[0] < 1)
      throw Error("--weights '" + path + "': /params must be [members, " + std::to_string(P) + "] for its " +
                  config.describe() + " CNN");
    members = shape[0];
    all = in.read<float>("/params", shape);
    for (std::size_t i = 0; i < all.size(); ++i)
      if (!std::isfinite(all[i]))
        throw Error("--weights '" + path + "': member " + std::to_string(i / static_cast<std::size_t>(P)) +
                    " has a non-finite parameter (index " + std::to_string(i % static_cast<std::size_t>(P)) +
                    "); the checkpoint is corrupt or training diverged");
    config_text = config.to_json();
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(&members, 1));
  runtime::broadcast(ctx, all, 0);
  runtime::broadcast(ctx, config_text);
  CheckpointParams out;
  out.config = models::CnnConfig::from_json(config_text, "--weights '" + path + "'");
  const auto P = static_cast<std::int64_t>(all.size()) / members;
  for (std::int64_t g = 0; g < members; ++g) out.members.emplace_back(all.begin() + g * P, all.begin() + (g + 1) * P);
  return out;
}

}  // namespace spmd::workloads
