#include "spmd/data/label_column.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_parallel_reader.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"
#include "label_checks.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace {

struct ColumnPlan {
  std::string dataset;                 // what holds the integers: key, or key/codes
  bool categorical = false;
  std::vector<std::string> categories;  // categorical only
};

std::string child(const std::string& group, const char* name) {
  return group.empty() || group.back() == '/' ? group + name : group + "/" + name;
}

void require_integer_column(const H5Reader& in, const std::string& name, const std::string& where,
                            std::int64_t global_rows) {
  const auto dims = in.shape(name);
  if (!is_column(dims) || dims[0] != global_rows)
    throw Error(where + " has shape " + format_shape(dims) + "; it must be [" + std::to_string(global_rows) +
                "] (or [" + std::to_string(global_rows) + ", 1]), one label per row of the features");
  H5Dataset dataset = open_dataset(in.file(), in.path(), name, "labels");
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset.get()), ("reading the type of " + where).c_str()));
  bool is_enum = false;
  const auto label_type = label_type_of(type.get(), is_enum);
  if (!label_type || is_enum)
    throw Error(where + " has dtype " + describe_hdf5_type(type.get()) +
                "; labels of a sparse matrix must be integers (numpy: y.astype('int64'))");
}

// Rank 0: what `key` is and how to read it.
ColumnPlan plan_column(const std::string& path, const std::string& key, std::int64_t global_rows) {
  const H5Reader in(path, "the labels '" + key + "'");
  ColumnPlan plan;
  if (in.has_dataset(key)) {
    require_integer_column(in, key, "'" + path + "': labels '" + key + "'", global_rows);
    plan.dataset = key;
    return plan;
  }
  const std::string where = "'" + path + "': labels '" + key + "'";
  if (!in.has_group(key)) {
    // AnnData before 0.8 kept obs as one compound dataset.
    const auto slash = key.find('/', 1);
    if (slash != std::string::npos && in.has_dataset(key.substr(0, slash)))
      throw Error(where + ": '" + key.substr(0, slash) + "' is a dataset (a table, as anndata < 0.8 wrote obs), not a "
                  "group of columns: rewrite the file with anndata >= 0.8 (anndata.read_h5ad(f).write_h5ad(f))");
    throw Error(where + ": no such dataset or group (--labels-key names an integer dataset [N] or an AnnData "
                "categorical column such as obs/cell_type)");
  }
  const std::string encoding =
      in.has_attribute(key, "encoding-type") ? in.attribute(key, "encoding-type").text : std::string();
  if (encoding != "categorical")
    throw Error(where + " is a group" + (encoding.empty() ? "" : " (encoding-type '" + encoding + "')") +
                ", not a categorical column (encoding-type 'categorical' with codes and categories)");
  plan.categorical = true;
  plan.dataset = child(key, "codes");
  if (!in.has_dataset(plan.dataset) || !in.has_dataset(child(key, "categories")))
    throw Error(where + ": a categorical column needs datasets codes and categories");
  require_integer_column(in, plan.dataset, where + " codes", global_rows);
  const std::string categories = child(key, "categories");
  {
    const H5Dataset d = open_dataset(in.file(), path, categories, "categories");
    H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(d.get()), ("reading the type of " + where + " categories").c_str()));
    if (H5Tget_class(type.get()) == H5T_STRING) {
      plan.categories = in.read_strings(categories);
    } else {
      for (double v : in.read<double>(categories)) {
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", v);
        plan.categories.emplace_back(text);
      }
    }
  }
  if (plan.categories.empty()) throw Error(where + " has no categories");
  return plan;
}

}  // namespace

LabelColumn load_label_column(const runtime::Context& ctx, const std::string& path, const std::string& key,
                              std::int64_t global_rows, std::int64_t first_row, std::int64_t rows, int classes) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  std::string answer;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const ColumnPlan plan = plan_column(path, key, global_rows);
    answer = nlohmann::json{{"dataset", plan.dataset}, {"categorical", plan.categorical}, {"categories", plan.categories}}
                 .dump();
  });
  runtime::broadcast(ctx, answer);
  const auto j = nlohmann::json::parse(answer);
  ColumnPlan plan{j["dataset"], j["categorical"], j["categories"].get<std::vector<std::string>>()};
  const std::string where = "'" + path + "': labels '" + key + "'";
  const int categories = static_cast<int>(plan.categories.size());
  if (plan.categorical && classes > 0 && classes != categories)
    throw CollectiveError(where + " has " + std::to_string(categories) + " categories; --classes is " +
                          std::to_string(classes));
  const int limit_classes = plan.categorical ? categories : classes;
  const auto values = read_rows_parallel<std::int64_t>(ctx, path, plan.dataset, first_row, rows);
  LabelColumn out;
  out.labels.resize(values.size());
  LabelScan scan;
  std::int64_t missing_row = -1;
  const std::int64_t bound = scan_bound(global_rows, limit_classes);
  const std::int64_t limit = limit_classes > 0 ? limit_classes : bound;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t row = first_row + static_cast<std::int64_t>(i);
    if (plan.categorical && values[i] == -1 && missing_row < 0) missing_row = row;
    out.labels[i] = scan.see(row, values[i], bound, limit);
  }
  runtime::agree_or_throw(ctx.comm(), missing_row < 0 ? std::string()
                                                      : rank_prefix(ctx) + where + ": row " + std::to_string(missing_row) +
                                                            " has no category (code -1, a missing value): drop or "
                                                            "label such rows first");
  CheckedLabels checked = agree_on_labels(ctx, where, global_rows, limit_classes, scan, out.labels);
  out.classes = checked.classes;
  out.class_counts = std::move(checked.class_counts);
  out.warnings = std::move(checked.warnings);
  out.class_names = std::move(plan.categories);
  out.description = plan.categorical ? "AnnData categorical '" + key + "' (" + std::to_string(categories) + " categories)"
                                     : "'" + key + "'";
  return out;
}

}  // namespace spmd::data
