#pragma once
// The ensemble trainer: this rank's members of spmd ensemble (one CNN per local device;
// member g = global device g) and what a run does with them: one SGD step of every member
// on the same batch, the ensemble on the test set, checkpoints written and resumed, the
// agreement on a stop request. run_ensemble (ensemble.hpp) is the epoch loop around it.
//
// The ensemble predicts the mean of its members' softmax probabilities (Flax's ensembling
// guide). The probabilities are summed over the members in a fixed tree (MemberSum), so every
// metric is bitwise the same for any layout of the members over ranks and devices; the class
// is the argmax of that sum, and the loss divides it by the member count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/data/feature_decoder.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/checkpoint.hpp"
#include "spmd/workloads/ensemble_options.hpp"
#include "spmd/workloads/member_sum.hpp"

namespace spmd::workloads {

struct TrainStepResult {
  double loss = 0;           // the members' mean cross-entropies, summed over members in member order
  std::int64_t correct = 0;  // rows of the batch the ensemble classified right
};

struct TestResult {
  std::int64_t rows = 0;
  std::int64_t correct = 0;                  // the ensemble's
  double loss = 0;                           // sum over rows of -log(ensemble probability of the label)
  std::vector<std::int64_t> member_correct;  // per member, in global member order
  std::vector<std::int64_t> member_non_finite;  // per member: rows whose probabilities hold a NaN or an infinity
};

class EnsembleTrainer {
 public:
  // Collective. Makes this rank's members on its devices, initialised from options.seed
  // (member g from the g-th key split, whatever rank holds it), with zero momentum.
  EnsembleTrainer(const runtime::Context& ctx, const EnsembleOptions& options);

  int members() const { return members_; }
  // What a checkpoint must agree on to be resumed: ensemble_defining_options.
  const std::string& defining_options() const { return defining_options_; }

  // The state of a run that starts from scratch.
  CheckpointState fresh_state() const;
  // Collective. Loads options.checkpoint into the members (refused, on every rank, when it
  // comes from other defining options or another member count) and returns its state.
  CheckpointState resume();
  // Collective. Writes options.checkpoint (atomically) with the members and `state`;
  // nothing without a checkpoint path.
  void save(const CheckpointState& state);

  // Whether the members take images stored one byte per value as those bytes, decoded
  // through the decoder's table where they compute (a GPU), rather than as host floats.
  bool takes_bytes(const data::FeatureDecoder& decoder) const;
  // Collective. One SGD-momentum step of every member on the same batch: images
  // [batch_size, pixels] in [0, 1], labels [batch_size] (host, identical on every rank).
  TrainStepResult step(const float* images, const std::int32_t* labels);
  // The same step on the images as stored bytes, where takes_bytes(decoder): the same bits.
  TrainStepResult step_bytes(const std::uint8_t* images, const models::ByteTable& table, const std::int32_t* labels);

  // Collective. The ensemble and every member on all rows of `test` (identical on every
  // rank; features kept as stored: data::FeatureForm::Stored), through the evaluation loop
  // of spmd eval (eval_loop.hpp): batches of eval_batch rows, the last one padded and
  // masked, each decoded to float32 once for every member.
  // padding_byte: the stored bytes of the last batch's padding rows: 0 (zero images) in
  // every product run. Tests poison them (0xFF: NaN rows of float32 images, whose scores are
  // all NaN, so their argmax is class 0, their padding labels' class): a padding row that
  // reached a count would count as correct, and one that reached the loss would make it NaN.
  TestResult evaluate(const data::LoadedShard& test, std::uint8_t padding_byte = 0);

  // Collective. FNV-1a over every member's parameters, in member order (reproducibility checks).
  std::uint64_t params_digest();

 private:
  void upload();    // host copies -> members
  void download();  // members -> host copies
  // train(member, out) runs one member's step into out ([loss, probabilities]).
  template <class Train>
  TrainStepResult step_with(const std::int32_t* labels, Train train);

  const runtime::Context& ctx_;
  const EnsembleOptions& options_;
  int members_ = 0;
  std::string defining_options_;
  std::vector<std::unique_ptr<models::CnnMember>> member_;  // one per local device
  // Host copies of the members' state: initialisation, checkpoints, digests. Training itself
  // runs on the members' devices.
  int classes_, pixels_;  // of options.model
  std::vector<models::CnnParams> params_, momentum_;
  std::vector<std::vector<float>> train_out_;  // per device: [loss, probabilities [batch_size][classes]]
  std::vector<std::vector<float>> test_probs_;  // per device: [eval_batch][classes]
  std::vector<float> test_images_;              // [eval_batch][pixels]: the test batch decoded
  // The sums over members of those records, in the fixed member tree (layout-independent).
  MemberSum train_sum_, test_sum_;
};

}  // namespace spmd::workloads
