#pragma once
// spmd ensemble: one CNN per device (member g = global device index, initialised from the
// g-th key split from --seed, never from its rank), every member on the same shuffled
// batches, SGD with momentum. The members, their mean prediction and why every metric is the
// same bits on any layout are the EnsembleTrainer's (ensemble_trainer.hpp); run_ensemble is
// the epoch loop. --resume continues from a checkpoint (checkpoint.hpp) bitwise as if never
// stopped.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/data/dataset.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/optim/sgd.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/ensemble_options.hpp"

namespace spmd::workloads {

struct EpochMetrics {
  int epoch = 0;
  double train_loss = 0;      // mean over steps of the mean over members
  double train_accuracy = 0;  // the ensemble's, on the training batches
  double test_loss = 0;       // the ensemble's mean probabilities
  double test_accuracy = 0;
  std::vector<double> member_test_accuracy;
  double seconds = 0;         // training steps of this epoch (not the test evaluation)
  double images_per_second = 0;  // per member
};

struct EnsembleResult {
  int members = 0;
  std::vector<EpochMetrics> epochs;  // every epoch of the run, resumed ones included
  bool interrupted = false;          // stopped by a signal (checkpoint written when --checkpoint)
  int stop_signal = 0;               // which (runtime/stop_request.hpp), 0 if none
  int stopped_epoch = 0;             // the epoch and the steps of it done when stopped
  std::int64_t stopped_step = 0, steps_per_epoch = 0;
  int resumed_from_epoch = -1;       // -1: fresh start
  // About the data, the same on every rank (data::LoadedShard::warnings: the label check
  // logreg and eval share, e.g. inferred classes without an example); known at `start`.
  std::vector<std::string> warnings;
  std::int64_t resumed_from_step = 0;
  double images_per_second = 0;      // per member, over this process's training steps
  std::uint64_t params_digest = 0;   // FNV-1a over every member's parameters (reproducibility checks)
  models::CnnConfig model;           // the members' architecture, as resolved from the data
  std::int64_t train_examples = 0, test_examples = 0;  // used (after --train-limit / --test-limit)
  std::int64_t train_dataset_rows = 0, test_dataset_rows = 0;  // N in each file
};

// What run_ensemble reports while it runs, on every rank (each may be empty). `start` comes
// once, when the data and any checkpoint are loaded and before the first step, with the
// position a --resume continues from (resumed_from_epoch -1 on a fresh start; the other
// fields of the result are not filled yet).
struct EnsembleEvents {
  std::function<void(const EnsembleResult& start)> start;
  std::function<void(const EpochMetrics&)> epoch;
  std::function<void(int epoch, std::int64_t step, std::int64_t steps, double images_per_second)> progress;
};

// One epoch's record, as the checkpoint's history and the JSON summary keep it.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EpochMetrics, epoch, train_loss, train_accuracy, test_loss, test_accuracy,
                                   member_test_accuracy, seconds, images_per_second)

// Collective.
EnsembleResult run_ensemble(const runtime::Context& ctx, const EnsembleOptions& options, const EnsembleEvents& events = {});

}  // namespace spmd::workloads
