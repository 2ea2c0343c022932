#include "spmd/data/feature_source.hpp"

#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::data {

namespace {

FeatureSource dense_rows_of(const SparseMatrixInfo& info) {
  FeatureSource s;
  s.shape.rows = info.rows;
  s.shape.sample_shape = {info.columns};
  s.shape.sample_size = info.columns;
  s.shape.features_type = ElementType::Float32;
  s.sparse = info;
  return s;
}

}  // namespace

// The dense probe first: its messages stay those of every dense file (a missing file, key or
// label). Only where it fails is the key looked at as a CSR group; when it is none, the dense
// probe's error stands. Both are the same on every rank, so the second probe is collective too.
FeatureSource probe_feature_source(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys) {
  try {
    return {probe_shape(ctx, path, keys), std::nullopt};
  } catch (const CollectiveError&) {
    if (const auto info = probe_sparse_matrix(ctx, path, keys.features)) return dense_rows_of(*info);
    throw;
  }
}

FeatureSource probe_feature_source(const std::string& path, const DatasetKeys& keys) {
  try {
    return {probe_shape(path, keys), std::nullopt};
  } catch (const Error&) {
    const H5Reader in(path, "the features '" + keys.features + "'");
    if (const auto info = probe_sparse_matrix(in, keys.features)) return dense_rows_of(*info);
    throw;
  }
}

}  // namespace spmd::data
