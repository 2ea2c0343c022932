#include "spmd/workloads/checkpoint.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_parallel_reader.hpp"
#include "spmd/data/h5_parallel_writer.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

namespace {

constexpr const char* kConfigAttribute = "cnn_config";

bool is_ensemble_checkpoint(const data::H5Reader& in) {
  return in.has_attribute("/", "model") && in.attribute_string("/", "model") == "cnn-ensemble";
}

// The config a checkpoint holds; one written before configs were stored holds the default.
models::CnnConfig stored_config(const data::H5Reader& in, const std::string& what) {
  if (!in.has_attribute("/", kConfigAttribute)) return models::CnnConfig::seed_default();
  return models::CnnConfig::from_json(in.attribute_string("/", kConfigAttribute), what);
}

// This rank's members [local members][P], as its rows of the file's [members][P] datasets
// (global member g = rank x devices per rank + local index).
std::vector<float> local_rows(const std::vector<models::CnnParams>& local) {
  std::vector<float> rows;
  for (const auto& p : local) rows.insert(rows.end(), p.data(), p.data() + p.size());
  return rows;
}

std::int64_t first_local_member(const runtime::Context& ctx) {
  return static_cast<std::int64_t>(ctx.rank()) * ctx.devices_per_rank();
}

// The history, a JSON array of per-epoch objects whose values are numbers or arrays of
// numbers, is stored as one dataset per field under /history: [epochs] (int64 for
// integers, float64 otherwise) or [epochs, n] for arrays. (As one attribute it hit HDF5's
// 64 KiB attribute limit after ~300 epochs of one member.) Rank 0 writes the rows; every
// rank holds the same history and makes the same calls.
constexpr const char* kHistoryGroup = "history";

void write_history(data::ParallelH5Writer& w, const runtime::Context& ctx, const nlohmann::json& history) {
  if (history.empty()) return;
  const auto epochs = static_cast<std::int64_t>(history.size());
  const std::int64_t mine = ctx.is_root() ? epochs : 0;
  for (const auto& [field, first] : history.front().items()) {
    const std::string name = std::string(kHistoryGroup) + "/" + field;
    const bool is_array = first.is_array();
    const auto width = static_cast<std::int64_t>(is_array ? first.size() : 0);
    const bool integer = !is_array && first.is_number_integer();
    std::vector<double> doubles;
    std::vector<std::int64_t> ints;
    for (const auto& epoch : history) {
      const auto& v = epoch.at(field);
      if (is_array != v.is_array() || (is_array && static_cast<std::int64_t>(v.size()) != width))
        throw Error("checkpoint: history field '" + field + "' changes shape between epochs");
      if (integer) ints.push_back(v.get<std::int64_t>());
      else if (is_array) for (const auto& x : v) doubles.push_back(x.get<double>());
      else doubles.push_back(v.get<double>());
    }
    const std::vector<std::int64_t> shape = is_array ? std::vector<std::int64_t>{epochs, width} : std::vector<std::int64_t>{epochs};
    if (integer) w.write_rows<std::int64_t>(name, shape, 0, mine, std::span<const std::int64_t>(ints.data(), mine ? ints.size() : 0));
    else w.write_rows<double>(name, shape, 0, mine, std::span<const double>(doubles.data(), mine ? doubles.size() : 0));
  }
}

nlohmann::json read_history(const data::H5Reader& in) {
  if (in.has_attribute("/", "history")) {  // written before the datasets
    const std::string text = in.attribute_string("/", "history");
    return nlohmann::json::parse(text.empty() ? "[]" : text);
  }
  const std::string prefix = std::string("/") + kHistoryGroup + "/";
  nlohmann::json history = nlohmann::json::array();
  for (const auto& name : in.datasets()) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string field = name.substr(prefix.size());
    const auto shape = in.shape(name);
    if (shape.empty() || shape.size() > 2) throw Error("checkpoint: history dataset '" + name + "' is not [epochs] or [epochs, n]");
    if (history.empty()) history = nlohmann::json::array_t(static_cast<std::size_t>(shape[0]), nlohmann::json::object());
    if (static_cast<std::int64_t>(history.size()) != shape[0])
      throw Error("checkpoint: history dataset '" + name + "' has " + std::to_string(shape[0]) + " epochs, others " +
                  std::to_string(history.size()));
    const auto set_each = [&](const auto& v) {
      for (std::size_t e = 0; e < v.size(); ++e) history[e][field] = v[e];
    };
    if (shape.size() == 1 && in.element_type(name) == data::ElementType::Int64) {
      set_each(in.read<std::int64_t>(name));
    } else if (shape.size() == 1) {
      set_each(in.read<double>(name));
    } else {
      const auto v = in.read<double>(name);
      const auto width = static_cast<std::size_t>(shape[1]);
      for (std::size_t e = 0; e < history.size(); ++e)
        history[e][field] = std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(e * width),
                                                v.begin() + static_cast<std::ptrdiff_t>((e + 1) * width));
    }
  }
  return history;
}

// The first "key=value" line of want that have holds with another value, or lacks (unless the
// line is one of when_absent), then the first of have's keys that want lacks; "" when they
// agree. Lines compare by key, not by position: the text follows the options' declaration
// order, which may change.
std::string first_difference(const std::string& want, const std::string& have, const std::string& when_absent) {
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto key = [](const std::string& line) { return line.substr(0, line.find('=')); };
  const auto a = lines(want), b = lines(have), absent = lines(when_absent);
  const auto find = [&](const std::vector<std::string>& in, const std::string& k) {
    return std::find_if(in.begin(), in.end(), [&](const std::string& l) { return key(l) == k; });
  };
  for (const auto& la : a)
    if (const auto lb = find(b, key(la)); lb == b.end() ? std::find(absent.begin(), absent.end(), la) == absent.end() : *lb != la)
      return "this run has '" + la + "', the checkpoint has '" + (lb == b.end() ? "(nothing)" : *lb) + "'";
  for (const auto& lb : b)
    if (find(a, key(lb)) == a.end()) return "this run has '(nothing)', the checkpoint has '" + lb + "'";
  return "";
}
}  // namespace

void write_checkpoint(const runtime::Context& ctx, const std::string& path, const CheckpointState& st,
                      const std::vector<models::CnnParams>& params, const std::vector<models::CnnParams>& momentum) {
  const models::CnnLayout& layout = params.front().layout();
  for (std::size_t i = 0; i < params.size(); ++i) {
    models::require_geometry(params[i], layout, "write_checkpoint");
    models::require_geometry(momentum.at(i), layout, "write_checkpoint (momentum)");
  }
  const auto P = static_cast<std::int64_t>(layout.param_count());
  const std::int64_t members = ctx.total_devices();
  const std::int64_t first = first_local_member(ctx), local = static_cast<std::int64_t>(params.size());
  // Every rank writes its own members' rows: nothing is gathered on rank 0.
  data::ParallelH5Writer w(ctx, path, 2 * static_cast<std::uint64_t>(members) * static_cast<std::uint64_t>(P) * sizeof(float));
  w.write_rows<float>("params", {members, P}, first, local, local_rows(params));
  w.write_rows<float>("momentum", {members, P}, first, local, local_rows(momentum));
  write_history(w, ctx, st.history);
  w.set_attribute_string("/", "model", "cnn-ensemble");
  w.set_attribute_string("/", kConfigAttribute, layout.config().to_json());
  w.set_attribute_int("/", "members", members);
  w.set_attribute_int("/", "param_count", P);
  w.set_attribute_int("/", "epochs_done", st.epochs_done);
  w.set_attribute_int("/", "step", st.step);
  w.set_attribute_double("/", "train_loss_sum", st.train_loss_sum);
  w.set_attribute_int("/", "train_correct", st.train_correct);
  w.set_attribute_int("/", "train_seen", st.train_seen);
  w.set_attribute_double("/", "train_seconds", st.train_seconds);
  w.set_attribute_string("/", "seed", std::to_string(st.seed));
  w.set_attribute_string("/", "options", st.options);
  if (!st.train_fingerprint.empty()) w.set_attribute_string("/", "train_fingerprint", st.train_fingerprint);
  w.commit();
}

void require_checkpoint_space(const runtime::Context& ctx, const std::string& path, int members,
                              const models::CnnConfig& config, int epochs) {
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const auto params = static_cast<std::uint64_t>(models::CnnLayout(config).param_count());
    // Parameters and momentum, the history (8 fields of 8 bytes and one per member per
    // epoch) and 64 KiB for HDF5's metadata and the attributes.
    const std::uint64_t bytes = 2 * static_cast<std::uint64_t>(members) * params * sizeof(float) +
                                static_cast<std::uint64_t>(epochs) * (8 + static_cast<std::uint64_t>(members)) * 8 +
                                (std::uint64_t{1} << 16);
    const std::string shortage = data::space_shortage(path, bytes, "a checkpoint of " + std::to_string(members) + " members");
    if (!shortage.empty()) throw Error("--checkpoint '" + path + "': " + shortage + "; nothing was trained");
  });
}

CheckpointState read_checkpoint(const runtime::Context& ctx, const std::string& path, const std::string& expected_options,
                                std::vector<models::CnnParams>& params, std::vector<models::CnnParams>& momentum,
                                const std::string& when_absent) {
  CheckpointState st;
  const models::CnnLayout& layout = params.front().layout();
  const std::size_t P = layout.param_count();
  std::int64_t ints[5] = {0, 0, 0, 0, 0};
  double doubles[2] = {0, 0};
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path, "the checkpoint to resume (--checkpoint with --resume)");
    const std::string what = "checkpoint '" + path + "'";
    if (!is_ensemble_checkpoint(in))
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
    const std::string diff = first_difference(expected_options, stored, when_absent);
    if (!diff.empty()) throw Error(what + " comes from a run with other options: " + diff);
    for (const char* name : {"/params", "/momentum"})
      if (in.shape(name) != std::vector<std::int64_t>{members, count})
        throw Error(what + ": " + name + " has shape " + data::format_shape(in.shape(name)) + ", expected [" +
                    std::to_string(members) + ", " + std::to_string(count) + "]");
    ints[0] = in.attribute_int("/", "epochs_done");
    ints[1] = in.attribute_int("/", "step");
    ints[2] = in.attribute_int("/", "train_correct");
    ints[3] = in.attribute_int("/", "train_seen");
    ints[4] = static_cast<std::int64_t>(std::stoull(in.attribute_string("/", "seed")));
    doubles[0] = in.attribute_double("/", "train_loss_sum");
    doubles[1] = in.attribute_double("/", "train_seconds");
    st.options = stored;
    st.history = read_history(in);
    if (in.has_attribute("/", "train_fingerprint")) st.train_fingerprint = in.attribute_string("/", "train_fingerprint");
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(ints, 5));
  runtime::broadcast(ctx, std::span<double>(doubles, 2));
  runtime::broadcast(ctx, st.options);
  runtime::broadcast(ctx, st.train_fingerprint);
  std::string history_text = st.history.dump();
  runtime::broadcast(ctx, history_text);
  st.history = nlohmann::json::parse(history_text);
  // Every rank reads its own members' rows.
  const std::int64_t first = first_local_member(ctx), local = static_cast<std::int64_t>(params.size());
  const auto p = data::read_rows_parallel<float>(ctx, path, "/params", first, local);
  const auto m = data::read_rows_parallel<float>(ctx, path, "/momentum", first, local);
  runtime::agree_on(ctx.comm(), [&] {
    for (std::size_t i = 0; i < p.size(); ++i)
      if (!std::isfinite(p[i]))
        throw Error("checkpoint '" + path + "': member " + std::to_string(first + static_cast<std::int64_t>(i / P)) +
                    " has a non-finite parameter (corrupt checkpoint)");
  });
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(i * P), P, params[i].data());
    std::copy_n(m.begin() + static_cast<std::ptrdiff_t>(i * P), P, momentum[i].data());
  }
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
  std::string config_text;
  std::int64_t members = 0;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    data::H5Reader in(path, "the ensemble checkpoint (--weights)");
    if (!is_ensemble_checkpoint(in))
      throw Error("--weights '" + path + "' is not an spmd ensemble checkpoint (no model = cnn-ensemble attribute)");
    const models::CnnConfig config = stored_config(in, "--weights '" + path + "'");
    const auto P = static_cast<std::int64_t>(models::CnnLayout(config).param_count());
    const auto shape = in.shape("/params");
    if (shape.size() != 2 || shape[1] != P || shape[0] < 1)
      throw Error("--weights '" + path + "': /params must be [members, " + std::to_string(P) + "] for its " +
                  config.describe() + " CNN");
    members = shape[0];
    config_text = config.to_json();
  });
  runtime::broadcast(ctx, std::span<std::int64_t>(&members, 1));
  runtime::broadcast(ctx, config_text);
  CheckpointParams out;
  out.config = models::CnnConfig::from_json(config_text, "--weights '" + path + "'");
  // Every rank needs every member; they read them together (MPI-IO collective reads) rather
  // than through one rank and a broadcast.
  const auto all = data::read_rows_parallel<float>(ctx, path, "/params", 0, members);
  const auto P = static_cast<std::int64_t>(all.size()) / members;
  runtime::agree_on(ctx.comm(), [&] {
    for (std::size_t i = 0; i < all.size(); ++i)
      if (!std::isfinite(all[i]))
        throw Error("--weights '" + path + "': member " + std::to_string(i / static_cast<std::size_t>(P)) +
                    " has a non-finite parameter (index " + std::to_string(i % static_cast<std::size_t>(P)) +
                    "); the checkpoint is corrupt or training diverged");
  });
  for (std::int64_t g = 0; g < members; ++g) out.members.emplace_back(all.begin() + g * P, all.begin() + (g + 1) * P);
  return out;
}

namespace {
std::string age_text(std::int64_t seconds) {
  if (seconds < 120) return std::to_string(std::max<std::int64_t>(seconds, 0)) + " s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + " min";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + " h " + std::to_string(seconds / 60 % 60) + " min";
  return std::to_string(seconds / 86400) + " days";
}

// What the file at path holds, for the refusal: a checkpoint's members and epochs, or why
// it is not one.
std::string existing_contents(const std::string& path) {
  try {
    const data::H5Reader in(path);
    if (!is_ensemble_checkpoint(in))
      return "an HDF5 file that is not a spmd ensemble checkpoint";
    return "a checkpoint of " + std::to_string(in.attribute_int("/", "members")) + " members after " +
           std::to_string(in.attribute_int("/", "epochs_done")) + " epochs";
  } catch (const std::exception&) {
    return "a file that is not an HDF5 checkpoint";
  }
}
}  // namespace

void refuse_existing_checkpoint(const std::string& path, const std::string& option) {
  const auto id = data::file_identity(path);
  if (id.size < 0) return;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::int64_t age = std::chrono::duration_cast<std::chrono::seconds>(now).count() - id.mtime_ns / 1000000000;
  throw Error("--" + option + " '" + path + "' already exists: " + existing_contents(path) + ", written " +
              age_text(age) + " ago (" + std::to_string(id.size) + " bytes). A training is not replaced by " +
              "accident: add --resume to continue it, --overwrite to replace it, or give another --" + option);
}

}  // namespace spmd::workloads
