#include "spmd/models/cnn_config.hpp"

#include <limits>
#include <nlohmann/json.hpp>

#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

// Kernel dimensions, strides and per-image sizes are ints (cblas, cuBLAS, the own GEMM).
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

std::string join(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

[[noreturn]] void fail(const std::string& what) { throw Error("CNN config: " + what); }

void require_at_least(const std::string& field, std::int64_t value, std::int64_t minimum) {
  if (value < minimum)
    fail("'" + field + "' must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
}

void require_fits(const std::string& what, std::int64_t floats) {
  if (floats > kMaxInt)
    fail(what + " would hold " + std::to_string(floats) + " floats; at most " + std::to_string(kMaxInt) +
         " fit the kernels' int sizes (use a smaller input or fewer features)");
}

}  // namespace

CnnConfig CnnConfig::seed_default() {
  CnnConfig c;
  c.height = 28;
  c.width = 28;
  c.channels = 1;
  c.conv_features = {32, 64};
  c.dense_features = {256};
  c.classes = 10;
  return c;
}

void CnnConfig::validate() const {
  require_at_least("height", height, 1);
  require_at_least("width", width, 1);
  require_at_least("channels", channels, 1);
  if (conv_features.empty()) fail("'conv_features' must list at least one conv layer (e.g. [32, 64])");
  for (std::size_t i = 0; i < conv_features.size(); ++i)
    require_at_least("conv_features[" + std::to_string(i) + "]", conv_features[i], 1);
  for (std::size_t i = 0; i < dense_features.size(); ++i)
    require_at_least("dense_features[" + std::to_string(i) + "]", dense_features[i], 1);
  require_at_least("classes", classes, 2);
  if (kernel_size != 3)
    fail("'kernel_size' must be 3 (the kernels implement 3x3 SAME convolutions), got " + std::to_string(kernel_size));
  if (pool_size != 2)
    fail("'pool_size' must be 2 (the kernels implement 2x2 average pooling, stride 2), got " +
         std::to_string(pool_size));
  // Each pool floors the size by half; L of them leave >= 1 row only from 2^L rows on.
  const std::size_t layers = conv_features.size();
  const std::int64_t need = layers >= 31 ? std::int64_t{1} << 31 : std::int64_t{1} << layers;
  for (auto [field, value] : {std::pair<const char*, int>{"height", height}, {"width", width}})
    if (value < need)
      fail(std::string("'") + field + "' must be >= " + std::to_string(need) + " for " + std::to_string(layers) +
           " conv layer(s): each 2x2 average pool halves it (rounding down) and the last pooled size must be "
           ">= 1; got " + std::to_string(value));
  require_fits("an input image", std::int64_t{height} * width * channels);
  std::int64_t h = height, w = width, c = channels;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::int64_t f = conv_features[l];
    const std::string layer = "conv layer " + std::to_string(l);
    require_fits(layer + "'s zero-bordered input", (h + 2) * (w + 2) * c);
    require_fits(layer + "'s im2col matrix", h * w * 9 * c);
    require_fits(layer + "'s output", h * w * f);
    require_fits(layer + "'s kernel", 9 * c * f);
    h /= 2, w /= 2, c = f;
  }
  std::int64_t in = h * w * c;
  require_fits("the flattened features", in);
  for (std::size_t j = 0; j <= dense_features.size(); ++j) {
    const std::int64_t out = j < dense_features.size() ? dense_features[j] : classes;
    require_fits("dense layer " + std::to_string(j) + "'s kernel", in * out);
    in = out;
  }
}

std::int64_t CnnConfig::input_size() const { return std::int64_t{height} * width * channels; }

bool CnnConfig::accepts_sample_shape(const std::vector<std::int64_t>& shape) const {
  if (shape == std::vector<std::int64_t>{height, width, channels}) return true;
  return channels == 1 && shape == std::vector<std::int64_t>{height, width};
}

std::string CnnConfig::image_text() const {
  return std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels);
}

std::string CnnConfig::describe() const {
  std::string s = image_text() + " conv " + join(conv_features);
  if (!dense_features.empty()) s += " dense " + join(dense_features);
  return s + " classes " + std::to_string(classes);
}

std::string CnnConfig::to_json() const {
  const nlohmann::json j = {{"height", height},
                            {"width", width},
                            {"channels", channels},
                            {"conv_features", conv_features},
                            {"dense_features", dense_features},
                            {"classes", classes},
                            {"kernel_size", kernel_size},
                            {"pool_size", pool_size}};
  return j.dump();
}

CnnConfig CnnConfig::from_json(const std::string& text, const std::string& source) {
  const std::string where = source + ": CNN config '" + text.substr(0, 200) + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " is not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  CnnConfig c;
  const auto integer = [&](const char* field, int& out) {
    if (!j.contains(field) || !j[field].is_number_integer())
      throw Error(where + " has no integer field '" + field + "'");
    const auto v = j[field].get<std::int64_t>();
    if (v < std::numeric_limits<int>::min() || v > kMaxInt) throw Error(where + ": '" + field + "' is out of range");
    out = static_cast<int>(v);
  };
  const auto list = [&](const char* field, std::vector<int>& out) {
    if (!j.contains(field) || !j[field].is_array()) throw Error(where + " has no list field '" + field + "'");
    for (const auto& e : j[field]) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() > kMaxInt)
        throw Error(where + ": '" + field + "' must hold non-negative integers");
      out.push_back(e.get<int>());
    }
  };
  integer("height", c.height);
  integer("width", c.width);
  integer("channels", c.channels);
  list("conv_features", c.conv_features);
  list("dense_features", c.dense_features);
  integer("classes", c.classes);
  integer("kernel_size", c.kernel_size);
  integer("pool_size", c.pool_size);
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
  return c;
}

}  // namespace spmd::models
