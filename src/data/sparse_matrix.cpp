#include "spmd/data/sparse_matrix.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace {

// Entries read per collective piece: bounded staging whatever the shard.
constexpr std::int64_t kPieceBytes = std::int64_t{64} << 20;

std::optional<std::string> text_attribute(const H5Reader& in, const std::string& object, const std::string& name) {
  if (!in.has_attribute(object, name)) return std::nullopt;
  const AttributeValue v = in.attribute(object, name);
  if (v.kind != AttributeValue::Kind::Text) return std::nullopt;
  return v.text;
}

[[noreturn]] void refuse_csc(const std::string& where, const std::string& layout) {
  throw Error(where + " is a column-compressed matrix (" + layout +
              "): its rows cannot be read rank by rank. Store it row-compressed (scipy: X.tocsr(); AnnData: "
              "adata.X = adata.X.tocsr(), then adata.write_h5ad(...))");
}

std::vector<std::int64_t> shape_attribute(const H5Reader& in, const std::string& group, const std::string& name,
                                          const std::string& where) {
  const AttributeValue v = in.attribute(group, name);
  if (v.kind != AttributeValue::Kind::Integers || v.integers.size() != 2)
    throw Error(where + ": attribute '" + name + "' is " + v.type_name + " " + format_shape(v.shape) +
                "; it must be two integers [rows, columns]");
  return v.integers;
}

std::string number(const char* fmt, double v) {
  char text[64];
  std::snprintf(text, sizeof text, fmt, v);
  return text;
}

std::string join_path(const std::string& group, const char* part) {
  return group.empty() || group.back() == '/' ? group + part : group + "/" + part;
}

}  // namespace

std::string SparseMatrixInfo::describe() const {
  const double cells = static_cast<double>(rows) * static_cast<double>(columns);
  return "CSR [" + std::to_string(rows) + " x " + std::to_string(columns) + "], " + std::to_string(nonzeros) +
         " non-zeros (" + number("%.3g", cells > 0 ? 100.0 * static_cast<double>(nonzeros) / cells : 0.0) +
         " %), data " + to_string(values_type) + ", indices " + to_string(indices_type) + " (" + layout + ")";
}

std::optional<SparseMatrixInfo> probe_sparse_matrix(const H5Reader& in, const std::string& name) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  if (in.has_dataset(name) || !in.has_group(name)) return std::nullopt;
  const std::string where = "'" + in.path() + "': group '" + name + "'";
  SparseMatrixInfo info;
  info.group = name;
  std::vector<std::int64_t> shape;
  if (const auto encoding = text_attribute(in, name, "encoding-type")) {
    if (*encoding == "csc_matrix") refuse_csc(where, "AnnData csc_matrix");
    if (*encoding != "csr_matrix")
      throw Error(where + " is an AnnData '" + *encoding + "', not a sparse matrix (csr_matrix)");
    info.layout = "AnnData csr_matrix";
    shape = shape_attribute(in, name, "shape", where);
  } else if (const auto format = text_attribute(in, name, "h5sparse_format")) {
    if (*format == "csc") refuse_csc(where, "h5sparse csc");
    if (*format != "csr") throw Error(where + ": h5sparse_format is '" + *format + "', not csr");
    info.layout = "h5sparse csr";
    shape = shape_attribute(in, name, "h5sparse_shape", where);
  } else {
    info.layout = "CSR group (data, indices, indptr, shape)";
    if (const auto format = text_attribute(in, name, "format"); format && *format == "csc") refuse_csc(where, "format csc");
    if (in.has_attribute(name, "shape")) {
      shape = shape_attribute(in, name, "shape", where);
    } else if (in.has_dataset(join_path(name, "shape"))) {
      shape = in.read<std::int64_t>(join_path(name, "shape"));
      if (shape.size() != 2) throw Error(where + ": dataset 'shape' must hold two integers [rows, columns]");
    } else {
      throw Error(where + " is a group, not a dataset, and not a sparse matrix: a CSR matrix needs datasets data, "
                  "indices, indptr and its shape [rows, columns] (an attribute or dataset 'shape')");
    }
  }
  std::string missing;
  for (const char* part : {"data", "indices", "indptr"})
    if (!in.has_dataset(join_path(name, part))) missing += std::string(missing.empty() ? "" : ", ") + part;
  if (!missing.empty()) throw Error(where + " (" + info.layout + ") lacks dataset(s) " + missing);
  info.rows = shape[0];
  info.columns = shape[1];
  if (info.rows < 1 || info.columns < 1)
    throw Error(where + " has shape [" + std::to_string(info.rows) + ", " + std::to_string(info.columns) +
                "]: it needs at least one row and one column");
  // The intercept takes column F: F + 1 must still be a 32-bit column index.
  if (info.columns >= std::numeric_limits<std::int32_t>::max())
    throw Error(where + " has " + std::to_string(info.columns) + " columns; at most 2^31 - 2 are supported");
  const auto data_dims = in.shape(join_path(name, "data"));
  const auto indices_dims = in.shape(join_path(name, "indices"));
  const auto indptr_dims = in.shape(join_path(name, "indptr"));
  info.values_type = in.element_type(join_path(name, "data"));
  info.indices_type = in.element_type(join_path(name, "indices"));
  info.indptr_type = in.element_type(join_path(name, "indptr"));
  if (!is_integer(info.indices_type) || !is_integer(info.indptr_type))
    throw Error(where + ": indices (" + to_string(info.indices_type) + ") and indptr (" + to_string(info.indptr_type) +
                ") must be integers");
  if (data_dims.size() != 1 || indices_dims != data_dims)
    throw Error(where + ": data " + format_shape(data_dims) + " and indices " + format_shape(indices_dims) +
                " must be 1-D of the same length (one per non-zero)");
  if (indptr_dims.size() != 1 || indptr_dims[0] != info.rows + 1) {
    const bool csc_like = indptr_dims.size() == 1 && indptr_dims[0] == info.columns + 1;
    throw Error(where + ": indptr has shape " + format_shape(indptr_dims) + "; a CSR matrix of " +
                std::to_string(info.rows) + " rows has " + std::to_string(info.rows + 1) + " entries" +
                (csc_like ? " (it has columns + 1: is it column-compressed, CSC? store X.tocsr())" : ""));
  }
  info.nonzeros = data_dims[0];
  const std::int64_t first = in.read_int64_at(join_path(name, "indptr"), 0);
  const std::int64_t last = in.read_int64_at(join_path(name, "indptr"), info.rows);
  if (first != 0 || last != info.nonzeros)
    throw Error(where + ": indptr runs from " + std::to_string(first) + " to " + std::to_string(last) +
                "; it must run from 0 to the " + std::to_string(info.nonzeros) + " non-zeros of data");
  return info;
}

std::optional<SparseMatrixInfo> probe_sparse_matrix(const runtime::Context& ctx, const std::string& path,
                                                    const std::string& name) {
  std::string answer;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const H5Reader in(path, "the features '" + name + "'");
    const auto info = probe_sparse_matrix(in, name);
    if (!info) return;
    answer = nlohmann::json{{"group", info->group},
                            {"layout", info->layout},
                            {"rows", info->rows},
                            {"columns", info->columns},
                            {"nonzeros", info->nonzeros},
                            {"values", static_cast<int>(info->values_type)},
                            {"indices", static_cast<int>(info->indices_type)},
                            {"indptr", static_cast<int>(info->indptr_type)}}
                 .dump();
  });
  runtime::broadcast(ctx, answer);
  if (answer.empty()) return std::nullopt;
  const auto j = nlohmann::json::parse(answer);
  SparseMatrixInfo info;
  info.group = j["group"];
  info.layout = j["layout"];
  info.rows = j["rows"];
  info.columns = j["columns"];
  info.nonzeros = j["nonzeros"];
  info.values_type = static_cast<ElementType>(j["values"].get<int>());
  info.indices_type = static_cast<ElementType>(j["indices"].get<int>());
  info.indptr_type = static_cast<ElementType>(j["indptr"].get<int>());
  return info;
}

SparseShard load_sparse_rows(const runtime::Context& ctx, const std::string& path, const SparseMatrixInfo& info,
                             std::int64_t first_row, std::int64_t rows, OnesColumn ones) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  SparseShard shard;
  shard.info = info;
  shard.global_rows = info.rows;
  shard.first_row = first_row;
  shard.rows = rows;
  shard.ones_column = ones == OnesColumn::append;
  const std::string where = "'" + path + "': sparse matrix '" + info.group + "'";
  if (first_row < 0 || rows < 0 || first_row > info.rows || rows > info.rows - first_row)
    throw CollectiveError(where + ": cannot read rows [" + std::to_string(first_row) + ", " +
                          std::to_string(first_row + rows) + ") of " + std::to_string(info.rows));
  H5File file = open_file_parallel(ctx, path, "the sparse matrix '" + info.group + "'");
  H5Dataset indptr, indices, data;
  runtime::agree_on(ctx.comm(), [&] {
    indptr = open_dataset(file.get(), path, join_path(info.group, "indptr"), "sparse indptr");
    indices = open_dataset(file.get(), path, join_path(info.group, "indices"), "sparse indices");
    data = open_dataset(file.get(), path, join_path(info.group, "data"), "sparse data");
  });
  const std::string hint = "reading " + where + " with MPI-IO";
  H5PropList xfer = collective_transfer(hint.c_str());
  refuse_lossy_conversions(xfer.get());

  // indptr's rows + 1 entries: where this rank's entries start and end.
  shard.row_start.assign(static_cast<std::size_t>(rows + 1), 0);
  read_in_pieces<std::int64_t>(
      ctx, indptr.get(), xfer.get(), first_row, rows + 1, kPieceBytes / 8,
      [&](std::int64_t at, std::int64_t) { return shard.row_start.data() + at; }, [](const std::int64_t*, std::int64_t, std::int64_t) {});
  const std::int64_t base = shard.row_start.front();
  runtime::agree_on(ctx.comm(), [&] {
    for (std::int64_t r = 0; r < rows; ++r)
      if (shard.row_start[static_cast<std::size_t>(r + 1)] < shard.row_start[static_cast<std::size_t>(r)])
        throw Error(rank_prefix(ctx) + where + ": indptr decreases at row " + std::to_string(first_row + r) + " (" +
                    std::to_string(shard.row_start[static_cast<std::size_t>(r)]) + " then " +
                    std::to_string(shard.row_start[static_cast<std::size_t>(r + 1)]) + ")");
    if (base < 0 || shard.row_start.back() > info.nonzeros)
      throw Error(rank_prefix(ctx) + where + ": indptr of rows " + std::to_string(first_row) + ".." +
                  std::to_string(first_row + rows) + " points outside the " + std::to_string(info.nonzeros) +
                  " entries of data");
    for (auto& s : shard.row_start) s -= base;
  });
  const std::int64_t entries = shard.row_start.back();
  const std::int64_t extra = shard.ones_column ? rows : 0;
  runtime::agree_on(ctx.comm(), [&] {
    shard.columns.resize(static_cast<std::size_t>(entries + extra));
    shard.values.resize(static_cast<std::size_t>(entries + extra));
  });
  // The row of entry k (for messages).
  const auto row_of = [&](std::int64_t k) {
    const auto it = std::upper_bound(shard.row_start.begin(), shard.row_start.end(), k);
    return first_row + static_cast<std::int64_t>(it - shard.row_start.begin()) - 1;
  };
  read_in_pieces<std::int32_t>(
      ctx, indices.get(), xfer.get(), base, entries, kPieceBytes / 4,
      [&](std::int64_t at, std::int64_t) { return shard.columns.data() + at; },
      [&](const std::int32_t* piece, std::int64_t row0, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i)
          if (piece[i] < 0 || piece[i] >= info.columns)
            throw Error(where + ": row " + std::to_string(row_of(row0 - base + i)) + " has column index " +
                        std::to_string(piece[i]) + ", outside [0, " + std::to_string(info.columns) + ")");
      });
  read_in_pieces<float>(
      ctx, data.get(), xfer.get(), base, entries, kPieceBytes / 4,
      [&](std::int64_t at, std::int64_t) { return shard.values.data() + at; },
      [&](const float* piece, std::int64_t row0, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i)
          if (!std::isfinite(piece[i]))
            throw Error(where + ": row " + std::to_string(row_of(row0 - base + i)) + " has value " +
                        number("%g", static_cast<double>(piece[i])) + " (column " +
                        std::to_string(shard.columns[static_cast<std::size_t>(row0 - base + i)]) +
                        "); values must be finite as float32");
      });
  if (shard.ones_column) {
    // Back to front, each row moves up by its index and gains the intercept's entry.
    for (std::int64_t r = rows - 1; r >= 0; --r) {
      const auto b = static_cast<std::size_t>(shard.row_start[static_cast<std::size_t>(r)]);
      const auto e = static_cast<std::size_t>(shard.row_start[static_cast<std::size_t>(r + 1)]);
      const auto shift = static_cast<std::size_t>(r);
      std::copy_backward(shard.columns.begin() + static_cast<std::ptrdiff_t>(b),
                         shard.columns.begin() + static_cast<std::ptrdiff_t>(e),
                         shard.columns.begin() + static_cast<std::ptrdiff_t>(e + shift));
      std::copy_backward(shard.values.begin() + static_cast<std::ptrdiff_t>(b),
                         shard.values.begin() + static_cast<std::ptrdiff_t>(e),
                         shard.values.begin() + static_cast<std::ptrdiff_t>(e + shift));
      shard.columns[e + shift] = static_cast<std::int32_t>(info.columns);
      shard.values[e + shift] = 1.0f;
    }
    for (std::int64_t r = 0; r <= rows; ++r) shard.row_start[static_cast<std::size_t>(r)] += r;
  }
  return shard;
}

}  // namespace spmd::data
