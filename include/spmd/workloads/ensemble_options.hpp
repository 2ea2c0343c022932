#pragma once
// What defines one ensemble run, apart from the loop that runs it (ensemble.hpp) and the
// members it trains (ensemble_trainer.hpp), which both read it.
#include <cstdint>
#include <string>

#include "spmd/data/dataset.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/optim/sgd.hpp"

namespace spmd::workloads {

struct EnsembleOptions {
  std::string train, test;
  data::DatasetKeys keys{"images", "labels"};       // of --train
  data::DatasetKeys test_keys{"images", "labels"};  // of --test (one file may hold /train/* and /test/*)
  int epochs = 1;
  int batch_size = 32;
  optim::SgdMomentum sgd;  // learning rate 0.1, momentum 0.9
  std::uint64_t seed = 0;
  std::int64_t train_limit = 0;  // 0: every training example
  std::int64_t test_limit = 0;   // 0: every test example
  int eval_batch = 512;          // test-set batch per device (padded, masked)
  std::string checkpoint;        // written after every epoch (and on SIGTERM/SIGINT)
  bool resume = false;
  // Each member's architecture. height, width or channels 0: taken from the training images
  // ([N, H, W, C], or [N, H, W] as C = 1); classes 0: 1 + the largest training label.
  models::CnnConfig model = models::CnnConfig::seed_default();
  data::FeatureScale input_scale{data::FeatureScale::Mode::Auto, 1.0, true};  // images
};

// The text that defines a run of `members` members (seed, optimiser, training data and its
// size, members): stored in the checkpoint and compared on --resume, which refuses a
// checkpoint whose text differs. The layout of the members may change; their count may not.
std::string ensemble_defining_options(const EnsembleOptions& options, int members);

}  // namespace spmd::workloads
