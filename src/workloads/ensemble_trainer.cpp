#include "spmd/workloads/ensemble_trainer.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "spmd/models/argmax.hpp"
#include "spmd/data/feature_decoder.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/workloads/eval_loop.hpp"

namespace spmd::workloads {

namespace {

using models::argmax;

template <class T>
runtime::PerDevice<std::span<const T>> spans_of(const std::vector<std::vector<T>>& per_device) {
  runtime::PerDevice<std::span<const T>> spans;
  for (const auto& v : per_device) spans.emplace_back(v);
  return spans;
}
}  // namespace

EnsembleTrainer::EnsembleTrainer(const runtime::Context& ctx, const EnsembleOptions& o)
    : ctx_(ctx),
      options_(o),
      members_(ctx.total_devices()),
      defining_options_(ensemble_defining_options(o, ctx.total_devices())),
      classes_(o.model.classes),
      pixels_(static_cast<int>(o.model.input_size())),
      train_sum_(ctx, 1 + static_cast<std::size_t>(o.batch_size) * static_cast<std::size_t>(o.model.classes)),
      test_sum_(ctx, static_cast<std::size_t>(o.eval_batch) * static_cast<std::size_t>(o.model.classes)) {
  const auto d = static_cast<std::size_t>(ctx.devices_per_rank());
  member_.resize(d);
  const models::CnnParams zero(o.model);
  params_.assign(d, zero);
  momentum_.assign(d, zero);
  train_out_.assign(d, std::vector<float>(1 + static_cast<std::size_t>(o.batch_size) * classes_));
  test_probs_.assign(d, std::vector<float>(static_cast<std::size_t>(o.eval_batch) * classes_));
  test_images_.assign(static_cast<std::size_t>(o.eval_batch) * static_cast<std::size_t>(pixels_), 0.0f);
  ctx.pool().run([&](int i) {
    const auto k = static_cast<std::size_t>(i);
    member_[k] = models::make_cnn_member(ctx.devices()[k], o.model, std::max(o.batch_size, o.eval_batch), o.batch_size);
    models::cnn_init(params_[k], models::ensemble_member_key(o.seed, ctx.global_device(i), members_));
    momentum_[k].set_zero();
  });
  upload();
}

void EnsembleTrainer::upload() {
  ctx_.pool().run([&](int i) { member_[static_cast<size_t>(i)]->set_state(params_[static_cast<size_t>(i)], momentum_[static_cast<size_t>(i)]); });
}

void EnsembleTrainer::download() {
  ctx_.pool().run([&](int i) { member_[static_cast<size_t>(i)]->get_state(params_[static_cast<size_t>(i)], momentum_[static_cast<size_t>(i)]); });
}

CheckpointState EnsembleTrainer::fresh_state() const {
  CheckpointState state;
  state.members = members_;
  state.seed = options_.seed;
  state.options = defining_options_;
  return state;
}

CheckpointState EnsembleTrainer::resume() {
  CheckpointState state = read_checkpoint(ctx_, options_.checkpoint, defining_options_, params_, momentum_,
                                          ensemble_defining_defaults());
  upload();
  return state;
}

void EnsembleTrainer::save(const CheckpointState& state) {
  if (options_.checkpoint.empty()) return;
  ctx_.set_phase("ensemble: writing checkpoint");
  download();
  write_checkpoint(ctx_, options_.checkpoint, state, params_, momentum_);
}

bool EnsembleTrainer::takes_bytes(const data::FeatureDecoder& decoder) const {
  return decoder.byte_table() != nullptr && !member_.empty() && member_.front()->decodes_bytes();
}

TrainStepResult EnsembleTrainer::step(const float* images, const std::int32_t* labels) {
  return step_with(labels, [&](models::CnnMember& m, float* out) {
    return m.train_step(images, labels, options_.batch_size, options_.sgd, out);
  });
}

TrainStepResult EnsembleTrainer::step_bytes(const std::uint8_t* images, const models::ByteTable& table,
                                            const std::int32_t* labels) {
  return step_with(labels, [&](models::CnnMember& m, float* out) {
    return m.train_step_bytes(images, labels, options_.batch_size, table, options_.sgd, out);
  });
}

template <class Train>
TrainStepResult EnsembleTrainer::step_with(const std::int32_t* labels, Train train) {
  const int B = options_.batch_size;
  ctx_.pool().run([&](int i) {
    auto& out = train_out_[static_cast<size_t>(i)];
    out[0] = train(*member_[static_cast<size_t>(i)], out.data() + 1);
  });
  // [sum of the losses, sums of the probabilities], over members in the member tree.
  const auto sum = train_sum_.sum(spans_of(train_out_));
  TrainStepResult r;
  r.loss = sum[0];
  for (int j = 0; j < B; ++j) r.correct += argmax(sum.data() + 1 + static_cast<size_t>(j) * classes_, classes_) == labels[j];
  return r;
}

TestResult EnsembleTrainer::evaluate(const data::LoadedShard& test, std::uint8_t padding_byte) {
  const int E = options_.eval_batch;
  TestResult r;
  r.rows = test.rows;
  // Per member: [correct rows, rows with a non-finite probability].
  std::vector<std::array<std::int64_t, 2>> member_counts(static_cast<size_t>(ctx_.devices_per_rank()), {0, 0});
  // Every member forwards the whole padded batch [E, H*W*C] (the ensemble is replicated, not
  // sharded: pad_shard_unpad over one "device"); only the real rows are counted.
  // The rows are kept as stored (ensemble.cpp): each padded batch is decoded once, for every
  // member (padding rows are zero bytes, which decode to 0.0f as zero floats were).
  // Members that decode bytes where they compute (a GPU) are given the uint8 rows instead.
  const data::FeatureDecoder decoder(test.stored_type, test.scale, "the test set");
  const std::int64_t row_bytes = pixels_ * static_cast<std::int64_t>(decoder.element_bytes());
  const models::ByteTable* table = decoder.byte_table();
  const bool members_decode = takes_bytes(decoder);
  auto step = [&](const EvalStep& a) {
    const std::byte* stored = a.shards[0].at(0).bytes();
    if (!members_decode) decoder.decode(stored, E * static_cast<std::int64_t>(pixels_), test_images_.data());
    const float* images = test_images_.data();
    const std::int32_t* labels = a.shards[1].at(0).data<std::int32_t>().data();
    const std::int64_t real = a.rows();
    ctx_.pool().run([&](int i) {
      float* probs = test_probs_[static_cast<size_t>(i)].data();
      if (members_decode)
        member_[static_cast<size_t>(i)]->forward_bytes(reinterpret_cast<const std::uint8_t*>(stored), E, *table, probs);
      else
        member_[static_cast<size_t>(i)]->forward(images, E, probs);
      auto& counts = member_counts[static_cast<size_t>(i)];
      for (std::int64_t row = 0; row < real; ++row) {
        const float* p = probs + row * classes_;
        counts[0] += argmax(p, classes_) == labels[row];
        counts[1] += !std::all_of(p, p + classes_, [](float v) { return std::isfinite(v); });
      }
    });
    const auto sum = test_sum_.sum(spans_of(test_probs_));
    for (std::int64_t row = 0; row < real; ++row) {
      const double* p = sum.data() + row * classes_;
      r.correct += argmax(p, classes_) == labels[row];
      r.loss -= std::log(std::max(p[labels[row]] / members_, 1e-30));
    }
  };
  EvalLoopOptions lo;
  lo.columns = {{0, sharding::Batched::Padding::Filled, padding_byte}, {1}};  // the labels' padding stays class 0 (see the header)
  EvalLoop loop(1, lo);
  const std::vector<sharding::ConstHostView> columns{
      sharding::ConstHostView(sharding::DType::UInt8, {test.rows, row_bytes}, test.stored.data()),
      sharding::ConstHostView(sharding::DType::Int32, {test.rows}, reinterpret_cast<const std::byte*>(test.labels.data()))};
  const std::int64_t block_rows = block_rows_for(E, row_bytes + static_cast<std::int64_t>(sizeof(std::int32_t)));
  RowBlocks blocks(in_memory_blocks(columns, block_rows), kBlockPrefetchDepth);
  loop.run(ctx_, blocks, sharding::StepPlan(sharding::BatchMode::PadWithMask, test.rows, {1, E}), step);
  runtime::PerDevice<std::span<const std::int64_t>> mc;
  for (const auto& c : member_counts) mc.emplace_back(c.data(), c.size());
  const std::vector<std::int64_t> counts = runtime::all_gather(ctx_, mc);
  for (size_t g = 0; g + 1 < counts.size(); g += 2) {
    r.member_correct.push_back(counts[g]);
    r.member_non_finite.push_back(counts[g + 1]);
  }
  return r;
}

std::uint64_t EnsembleTrainer::params_digest() {
  download();
  std::vector<std::int64_t> local;
  for (const auto& p : params_) {
    const std::string bytes(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float));
    local.push_back(static_cast<std::int64_t>(runtime::stable_hash(bytes)));
  }
  runtime::PerDevice<std::span<const std::int64_t>> spans;
  for (const auto& v : local) spans.emplace_back(&v, 1);
  const auto all = runtime::all_gather(ctx_, spans);
  return runtime::stable_hash(std::string(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(std::int64_t)));
}

}  // namespace spmd::workloads
