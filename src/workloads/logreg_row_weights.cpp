#include "spmd/workloads/logreg_row_weights.hpp"

#include <cmath>
#include <cstdlib>
#include <span>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_parallel_reader.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/small_text_file.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {

constexpr std::size_t kMaxClassWeightFileBytes = std::size_t{1} << 26;  // 2^24 classes of short numbers

// "1,2.5 0.3\n..." -> numbers; false if any token is not a number.
bool parse_numbers(const std::string& text, std::vector<double>& out) {
  std::string token;
  std::size_t at = 0;
  const auto flush = [&]() {
    if (token.empty()) return true;
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (end == token.c_str() || *end != '\0') return false;
    out.push_back(v);
    token.clear();
    return true;
  };
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (c == '#') {  // a comment to the end of the line
      while (at < text.size() && text[at] != '\n') ++at;
      if (!flush()) return false;
    } else if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!flush()) return false;
    } else {
      token += c;
    }
  }
  return flush();
}

std::string number_text(double v) { return format("%.17g", v); }

}  // namespace

std::vector<double> parse_class_weights(const std::string& text, std::span<const std::int64_t> class_counts,
                                        int classes) {
  std::vector<double> w;
  if (text == "balanced") {
    std::int64_t present = 0, rows = 0;
    for (auto c : class_counts) {
      present += c > 0;
      rows += c;
    }
    // sklearn's compute_class_weight("balanced"): n_samples / (n_classes * bincount(y)), over
    // the classes that occur; a class without rows weighs nothing.
    for (int c = 0; c < classes; ++c) {
      const std::int64_t count = c < static_cast<int>(class_counts.size()) ? class_counts[static_cast<std::size_t>(c)] : 0;
      w.push_back(count > 0 ? static_cast<double>(rows) / (static_cast<double>(present) * static_cast<double>(count)) : 0.0);
    }
    return w;
  }
  std::string source = "--class-weight '" + text + "'";
  if (!parse_numbers(text, w)) {
    w.clear();
    const std::string contents =
        runtime::read_small_text_file(text, "--class-weight '" + text + "'", kMaxClassWeightFileBytes,
                                      "--class-weight is 'balanced', a list W0,W1,... or a text file of one weight "
                                      "per class");
    if (!parse_numbers(contents, w))
      throw Error("--class-weight file '" + text + "' holds something that is not a number (one weight per class, "
                  "separated by commas, spaces or new lines; '#' starts a comment)");
    source = "--class-weight file '" + text + "'";
  }
  if (static_cast<int>(w.size()) != classes)
    throw Error(source + " gives " + std::to_string(w.size()) + " weights; the data has " + std::to_string(classes) +
                " classes (one weight per class, class 0 first)");
  for (std::size_t c = 0; c < w.size(); ++c)
    if (!(w[c] >= 0) || !std::isfinite(w[c]))
      throw Error(source + ": the weight of class " + std::to_string(c) + " is " + number_text(w[c]) +
                  "; class weights must be finite and >= 0");
  return w;
}

RowWeights logreg_row_weights(const runtime::Context& ctx, const std::string& data_path,
                              const std::string& sample_weight_key, const std::string& class_weight,
                              const WeightedRows& shard) {
  RowWeights r;
  if (sample_weight_key.empty() && class_weight.empty()) {
    r.total = static_cast<double>(shard.global_rows);
    return r;
  }
  std::vector<std::string> parts;
  if (!sample_weight_key.empty()) {
    const std::string name = "'" + data_path + "': sample weights '" + sample_weight_key + "'";
    runtime::agree_on(ctx.comm(), [&] {
      if (!ctx.is_root()) return;
      data::H5Reader in(data_path, "the sample weights (--sample-weight-key)");
      if (!in.has_dataset(sample_weight_key))
        throw Error(name + ": no such dataset (--sample-weight-key names a dataset [N] of the data file)");
      const auto shape = in.shape(sample_weight_key);
      const bool column = shape.size() == 2 && shape[1] == 1;
      if ((shape.size() != 1 && !column) || shape[0] != shard.global_rows)
        throw Error(name + " has shape " + data::format_shape(shape) + "; it must be [" +
                    std::to_string(shard.global_rows) + "], one weight per row of the features");
    });
    r.rows = data::read_rows_parallel<double>(ctx, data_path, sample_weight_key, shard.first_row, static_cast<std::int64_t>(shard.labels.size()));
    runtime::agree_on(ctx.comm(), [&] {
      for (std::size_t i = 0; i < r.rows.size(); ++i)
        if (!(r.rows[i] >= 0) || !std::isfinite(r.rows[i]))
          throw Error(name + ": row " + std::to_string(shard.first_row + static_cast<std::int64_t>(i)) + " has weight " +
                      number_text(r.rows[i]) + "; sample weights must be finite and >= 0");
    });
    parts.push_back("sample weights '" + sample_weight_key + "'");
  }
  if (!class_weight.empty()) {
    // Rank 0 reads a class-weight file (one open per run, not per rank) and sends the weights.
    runtime::agree_on(ctx.comm(), [&] {
      if (ctx.is_root()) r.class_weights = parse_class_weights(class_weight, shard.class_counts, shard.classes);
    });
    runtime::broadcast(ctx, r.class_weights);
    if (r.rows.empty()) r.rows.assign(shard.labels.size(), 1.0);
    for (std::size_t i = 0; i < r.rows.size(); ++i) r.rows[i] *= r.class_weights[static_cast<std::size_t>(shard.labels[i])];
    std::string list;
    for (std::size_t c = 0; c < r.class_weights.size() && c < 8; ++c)
      list += (c ? ", " : "") + format("%.4g", r.class_weights[c]);
    if (r.class_weights.size() > 8) list += ", ...";
    parts.push_back("class weights " + std::string(class_weight == "balanced" ? "balanced " : "") + "[" + list + "]");
  }
  double local = 0;
  for (double w : r.rows) local += w;
  r.total = local;
  runtime::allreduce_sum(ctx, std::span<double>(&r.total, 1));
  if (!(r.total > 0))
    throw CollectiveError("logreg: every row of '" + data_path + "' has weight 0 (" + parts.front() +
                          "): nothing to fit");
  for (std::size_t i = 0; i < parts.size(); ++i) r.description += (i ? " x " : "") + parts[i];
  return r;
}

}  // namespace spmd::workloads
