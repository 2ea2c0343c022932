#include "spmd/workloads/logreg.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "spmd/data/label_column.hpp"
#include "spmd/data/sparse_matrix.hpp"
#include "spmd/models/logreg_sparse.hpp"
#include "spmd/optim/owlqn.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/logreg_objective.hpp"
#include "spmd/workloads/logreg_row_weights.hpp"
#include "spmd/workloads/logreg_standardize.hpp"
#include "spmd/workloads/logreg_weights.hpp"
#include "spmd/workloads/memory_estimate.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The objective as the solver sees it; also checks, when asked, that every rank holds the
// same iterate (replicated state must never drift). With standardized features the solver's
// x is W' (the scaled features' weights): f runs on W = W' * inv row by row, its gradient is
// mapped back, and the L2 term (which f then leaves out) is on W' (logreg_standardize.hpp).
class CheckedObjective {
 public:
  CheckedObjective(DataParallelLogreg& f, const runtime::Context& ctx, bool verify, std::vector<double> inverse_scales,
                   double l2, std::size_t penalised)
      : f_(f), ctx_(ctx), verify_(verify), inv_(std::move(inverse_scales)), l2_(l2), penalised_(penalised) {}
  double value_and_grad(std::span<const double> x, std::span<double> grad) {
    check_replicas(x);
    if (inv_.empty()) return f_.value_and_grad(x, grad);
    const auto C = static_cast<std::size_t>(f_.classes());
    W_.resize(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) W_[k] = x[k] * inv_[k / C];
    double value = f_.value_and_grad(W_, grad);
    double squares = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      grad[k] *= inv_[k / C];
      if (k < penalised_ && l2_ > 0) {
        squares += x[k] * x[k];
        grad[k] += l2_ * x[k];
      }
    }
    return value + 0.5 * l2_ * squares;
  }
  void set_l2(double l2) { l2_ = l2; }

 private:
  void check_replicas(std::span<const double> x) {
    if (verify_) {
      std::string bytes(reinterpret_cast<const char*>(x.data()), x.size_bytes());
      const auto h = static_cast<std::int64_t>(runtime::stable_hash(bytes) >> 1);
      std::int64_t mm[2] = {h, -h};
      runtime::allreduce_max(ctx_, std::span<std::int64_t>(mm, 2));
      if (mm[0] != -mm[1])
        throw CollectiveError("logreg: the replicated iterate differs between ranks at evaluation " +
                              std::to_string(f_.evaluations() + 1) + " (a non-deterministic reduction?)");
    }
  }

  DataParallelLogreg& f_;
  const runtime::Context& ctx_;
  bool verify_;
  std::vector<double> inv_;  // empty: not standardized; else [features] (1 for the intercept's row)
  double l2_;
  std::size_t penalised_;
  std::vector<double> W_;
};
}  // namespace

LogregResult run_logreg(const runtime::Context& ctx, const LogregOptions& o,
                        const std::function<void(const LogregIterationRecord&)>& on_iteration,
                        const std::function<void(const std::string&)>& on_warning) {
  const auto start = Clock::now();
  optim::validate(o.solver);
  // A group of data/indices/indptr under the features key is a sparse matrix; else dense rows.
  const auto sparse = data::probe_sparse_matrix(ctx, o.data, o.keys.features);
  if (sparse && o.keys.labels.empty())
    throw CollectiveError("logreg: '" + o.data + "': the features '" + o.keys.features +
                          "' are a sparse matrix; name its labels with --labels-key (an integer dataset [N] or an "
                          "AnnData categorical column such as obs/cell_type)");
  const data::DatasetShape shape = sparse ? data::DatasetShape{} : data::probe_shape(ctx, o.data, o.keys);
  const std::int64_t global_rows = sparse ? sparse->rows : shape.rows;
  const std::int64_t sample_size = sparse ? sparse->columns : shape.sample_size;
  const std::int64_t features = sample_size + (o.fit_intercept ? 1 : 0);
  // A sparse problem's chunks hold about F entries each (models/logreg_sparse.hpp).
  const std::int64_t chunk_rows =
      sparse ? models::logreg_sparse_chunk_rows(global_rows, features,
                                                sparse->nonzeros + (o.fit_intercept ? global_rows : 0))
             : models::kLogregChunkRows;
  const auto rows = logreg_rank_rows(global_rows, ctx.rank(), ctx.size(), chunk_rows);
  const auto memory = [&](int classes, bool with_data) {
    if (!sparse) return logreg_memory(rows.size, features, classes, o.solver.history, with_data);
    MemoryEstimate e = logreg_memory(rows.size, features, classes, o.solver.history, false);
    e.parts.pop_back();  // chunk records: a sparse shard streams them through ~log2(chunks) + 2 tree records
    const double weights = static_cast<double>(features) * classes;
    const double chunks = std::ceil(static_cast<double>(global_rows) / static_cast<double>(chunk_rows));
    e.parts.emplace_back("tree records", 8 * (1 + weights) * (std::log2(std::max(1.0, chunks)) + 2));
    if (with_data)
      e.parts.emplace_back("sparse rows", 8 * (static_cast<double>(sparse->nonzeros) * static_cast<double>(rows.size) /
                                                   static_cast<double>(global_rows) +
                                               static_cast<double>(rows.size) * 2));
    return e;
  };
  require_memory_fits(ctx, memory(std::max(2, o.classes), true),
                      "spread the rows over more ranks or nodes; the solver's share (2 x --history + 6 "
                      "vectors of features x classes doubles, on every rank) shrinks only with --history");
  // A warm start is checked against the data before the rows are read.
  LogregStart warm;
  if (!o.init_weights.empty()) {
    ctx.set_phase("logreg: reading --init-weights");
    warm = read_logreg_start(ctx, o.init_weights);
    if (warm.features != sample_size)
      throw CollectiveError("logreg: --init-weights '" + o.init_weights + "' has W for " +
                            std::to_string(warm.features) + " features, the data '" + o.data + "' has " +
                            std::to_string(sample_size) + " per row");
    if (warm.bias.empty() == o.fit_intercept)
      throw CollectiveError("logreg: --init-weights '" + o.init_weights + "' " +
                            (o.fit_intercept ? "has no intercept 'b', and --fit-intercept fits one"
                                             : "has an intercept 'b', and this run fits none (add --fit-intercept)"));
    if (o.classes > 0 && warm.classes != o.classes)
      throw CollectiveError("logreg: --init-weights '" + o.init_weights + "' has " + std::to_string(warm.classes) +
                            " classes, --classes is " + std::to_string(o.classes));
  }
  ctx.set_phase("logreg: loading rows");
  const auto ones = o.fit_intercept ? data::OnesColumn::append : data::OnesColumn::none;
  data::LoadedShard shard;
  data::SparseShard sparse_rows;
  data::LabelColumn label_column;
  if (sparse) {
    label_column = data::load_label_column(ctx, o.data, o.keys.labels, global_rows, rows.first, rows.size, o.classes);
    sparse_rows = data::load_sparse_rows(ctx, o.data, *sparse, rows.first, rows.size, ones);
    shard.classes = label_column.classes;
    shard.class_counts = label_column.class_counts;
    shard.warnings = label_column.warnings;
  } else {
    shard = data::load_shard(ctx, o.data, o.keys, rows.first, rows.size, o.classes, o.input_scale,
                             data::FeatureForm::Float32, ones);
  }
  const std::span<const std::int32_t> labels = sparse ? std::span<const std::int32_t>(label_column.labels)
                                                      : std::span<const std::int32_t>(shard.labels);
  LogregResult r;
  r.load_seconds = since(start);
  allreduce_max(ctx, std::span<double>(&r.load_seconds, 1));
  r.rows = global_rows;
  r.features = static_cast<int>(sample_size);
  r.classes = shard.classes;
  r.warnings = shard.warnings;
  r.chunk_rows = chunk_rows;
  if (sparse) {
    r.sparse = sparse->describe();
    r.nonzeros = sparse->nonzeros;
    r.labels = label_column.description;
    r.class_names = label_column.class_names;
  }
  if (on_warning)
    for (const auto& warning : r.warnings) on_warning(warning);
  if (r.classes < 2)
    throw CollectiveError("logreg: '" + o.data + "' has labels of " + std::to_string(r.classes) +
                          " class(es); multiclass logistic regression needs at least 2 (set --classes)");
  // Inferred classes are known only now; the shard is in memory already.
  if (o.classes <= 0)
    require_memory_fits(ctx, memory(r.classes, false),
                        "the weights are features x classes (" + std::to_string(r.classes) +
                            " classes = 1 + the largest label): remap ids to 0..K-1 (numpy: np.unique(y, "
                            "return_inverse=True)) or lower --history");
  r.rows_per_rank.resize(static_cast<size_t>(ctx.size()));
  const std::int64_t my_rows = rows.size;
  runtime::allgather_bytes(ctx, &my_rows, sizeof my_rows, r.rows_per_rank.data());

  if (!o.init_weights.empty() && warm.classes != r.classes)
    throw CollectiveError("logreg: --init-weights '" + o.init_weights + "' has " + std::to_string(warm.classes) +
                          " classes, the data '" + o.data + "' has " + std::to_string(r.classes) +
                          " (1 + its largest label; set --classes if the labels leave some out)");
  ctx.set_phase("logreg: row weights");
  const RowWeights row_weights = logreg_row_weights(
      ctx, o.data, o.sample_weight_key, o.class_weight,
      WeightedRows{global_rows, rows.first, labels, shard.class_counts, r.classes});
  r.weighting = row_weights.description;
  r.class_weights = row_weights.class_weights;
  r.weight_total = row_weights.total;
  // Standardized, the L2 term is on the scaled weights: CheckedObjective adds it, not f.
  const double data_l2 = o.standardize ? 0.0 : o.l2_strength();
  std::optional<DataParallelLogreg> objective_storage;
  if (sparse)
    objective_storage.emplace(ctx, sparse_rows, labels, chunk_rows, r.classes, data_l2, o.precision, row_weights.rows);
  else
    objective_storage.emplace(ctx, shard, r.classes, data_l2, o.precision, row_weights.rows);
  DataParallelLogreg& objective = *objective_storage;
  std::vector<double> inverse_scales;
  if (o.standardize) {
    ctx.set_phase("logreg: feature scales (--standardize)");
    inverse_scales = sparse ? logreg_inverse_scales(ctx, sparse_rows, chunk_rows, row_weights.rows)
                            : logreg_inverse_scales(ctx, shard, chunk_rows, row_weights.rows);
    r.constant_features = std::count(inverse_scales.begin(), inverse_scales.begin() + r.features, 0.0);
  }
#ifndef NDEBUG
  constexpr bool kVerifyAlways = true;  // a debug build checks what a release build checks on request
#else
  constexpr bool kVerifyAlways = false;
#endif
  CheckedObjective checked(objective, ctx, o.verify_replicas || kVerifyAlways, inverse_scales, o.l2_strength(),
                           static_cast<std::size_t>(r.features) * static_cast<std::size_t>(r.classes));
  // From zeros (W and b), as sklearn and JAXopt start, or from the warm start's W' = [W; b].
  std::vector<double> x0(static_cast<size_t>(objective.features()) * static_cast<size_t>(r.classes), 0.0);
  if (!o.init_weights.empty()) {
    std::copy(warm.W.begin(), warm.W.end(), x0.begin());
    std::copy(warm.bias.begin(), warm.bias.end(), x0.begin() + static_cast<std::ptrdiff_t>(warm.W.size()));
    // Standardized, the solver's weights are W * std (0 for a constant feature).
    for (std::size_t k = 0; k < x0.size() && !inverse_scales.empty(); ++k) {
      const double inv = inverse_scales[k / static_cast<std::size_t>(r.classes)];
      x0[k] = inv > 0 ? x0[k] / inv : 0.0;
    }
  }
  auto last = Clock::now();
  const auto solve_start = last;
  auto callback = [&](const optim::LBFGSIteration& it) {
    LogregIterationRecord rec;
    rec.point = static_cast<int>(r.path.size()) + 1;  // the solve under way
    rec.iteration = it.iteration;
    rec.value = it.value;
    rec.error = it.error;
    rec.stepsize = it.stepsize;
    rec.evaluations = it.evaluations;
    rec.seconds = since(last);
    last = Clock::now();
    if (it.iteration == 1 && r.setup_seconds == 0) r.setup_seconds = since(start);
    r.history.push_back(rec);
    ctx.set_phase("logreg iteration " + std::to_string(it.iteration + 1));
    if (on_iteration) on_iteration(rec);
  };
  ctx.set_phase("logreg iteration 1");
  // In float32 the objective is float32 arithmetic accumulated in double (models/logreg.hpp):
  // its value is no more precise than float32, whatever the solver's Scalar.
  auto solver = o.solver;
  solver.objective_precision = o.precision == models::LogregPrecision::float64 ? std::numeric_limits<double>::epsilon()
                                                                                : std::numeric_limits<float>::epsilon();
  // One more tiny allreduce per iteration (next to an evaluation's reductions) so that every
  // rank stops before the same iteration.
  const auto stop = [&] { return (r.stop_signal = runtime::agreed_stop_signal(ctx)) != 0; };
  // W's entries come first in x (the intercept's row last): only they carry the L1 term.
  const auto penalised = static_cast<std::size_t>(r.features) * static_cast<std::size_t>(r.classes);
  // One point per strength of --reg-path (one without), each from the last one's weights.
  std::vector<double> strengths = o.reg_path;
  if (strengths.empty()) strengths.push_back(o.reg);
  std::vector<double> start_x = x0;
  for (std::size_t p = 0; p < strengths.size(); ++p) {
    LogregOptions point_options = o;
    if (!o.reg_path.empty()) {
      point_options.reg = strengths[p];
      point_options.l2 = 0;
    }
    LogregPathPoint point;
    point.reg = strengths[p];
    point.l1 = point_options.l1_strength();
    point.l2 = point_options.l2_strength();
    objective.set_l2(o.standardize ? 0.0 : point.l2);
    checked.set_l2(point.l2);
    const auto point_start = Clock::now();
    const auto result =
        point.l1 > 0 ? optim::owlqn_minimize<double>(checked, std::span<const double>(start_x), solver, point.l1,
                                                     penalised, callback, stop)
                     : optim::lbfgs_minimize<double>(checked, std::span<const double>(start_x), solver, callback, stop);
    point.solve_seconds = since(point_start);
    point.status = result.status;
    point.iterations = result.iterations;
    point.value = static_cast<double>(result.value);
    point.error = static_cast<double>(result.error);
    point.evaluations = result.evaluations;
    start_x.assign(result.x.begin(), result.x.end());
    // x is W' = [W; b] row-major: W's rows first, then the intercept's; standardized, in the
    // scaled features' units, reported in the original ones.
    auto x = start_x;
    for (std::size_t k = 0; k < x.size() && !inverse_scales.empty(); ++k)
      x[k] *= inverse_scales[k / static_cast<std::size_t>(r.classes)];
    point.W64.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(penalised));
    if (o.fit_intercept) point.bias64.assign(x.begin() + static_cast<std::ptrdiff_t>(penalised), x.end());
    point.W.assign(point.W64.begin(), point.W64.end());
    point.bias.assign(point.bias64.begin(), point.bias64.end());
    point.nonzero_weights = std::count_if(point.W64.begin(), point.W64.end(), [](double w) { return w != 0; });
    r.path.push_back(std::move(point));
    if (r.stop_signal != 0 || result.status == optim::LBFGSStatus::non_finite) break;  // the rest is not solved
  }
  r.solve_seconds = since(solve_start);
  const LogregPathPoint& last_point = r.path.back();
  r.status = last_point.status;
  r.iterations = last_point.iterations;
  r.value = last_point.value;
  r.error = last_point.error;
  r.evaluations = 0;
  for (const auto& point : r.path) r.evaluations += point.evaluations;
  r.seconds_per_evaluation = r.evaluations ? r.solve_seconds / static_cast<double>(r.evaluations) : 0;
  if (r.setup_seconds == 0) r.setup_seconds = since(start);
  r.W64 = last_point.W64;
  r.bias64 = last_point.bias64;
  r.W = last_point.W;
  r.bias = last_point.bias;
  return r;
}

}  // namespace spmd::workloads
