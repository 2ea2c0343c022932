#pragma once
// The ensemble checkpoint: every member's parameters and momentum, where training stands,
// and what defined the run. One HDF5 file, written by every rank at once (each its own
// members' rows, collective MPI-IO) through a temporary file and a rename: a crash
// mid-write leaves the previous checkpoint intact, and no rank gathers the members.
//
//   /params    float32 [members, P]   (Flax layout, see models/cnn_params.hpp)
//   /momentum  float32 [members, P]
//   /history/<field>  the finished epochs' metrics, one dataset per field: [epochs] (epoch:
//              int64; train_loss, test_accuracy, ...: float64) or [epochs, members]
//              (member_test_accuracy)
//   attributes on /: model "cnn-ensemble", cnn_config (JSON text of the models::CnnConfig,
//   e.g. {"height":28,"width":28,"channels":1,"conv_features":[32,64],...}), members,
//   param_count (P, derived from cnn_config), epochs_done, step, train_loss_sum,
//   train_correct, train_seen, train_seconds, seed, options (text), train_fingerprint
// A checkpoint without cnn_config (written before geometry was data) holds the default
// config, CnnConfig::seed_default(), whose layout has not changed; one with a history
// attribute (written before /history) is read as well.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/models/cnn_params.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

struct CheckpointState {
  int members = 0;
  int epochs_done = 0;        // whole epochs finished
  std::int64_t step = 0;      // steps finished in epoch epochs_done + 1
  double train_loss_sum = 0;  // running sums of that epoch
  std::int64_t train_correct = 0;
  std::int64_t train_seen = 0;
  double train_seconds = 0;
  std::uint64_t seed = 0;
  std::string options;  // the defining options, "key=value" lines
  // FNV-1a of the training data as read (features as stored, labels, shape), hex; empty in
  // checkpoints written before it was recorded. Resume compares it: another file of the same
  // size and name is refused.
  std::string train_fingerprint;
  nlohmann::json history = nlohmann::json::array();  // finished epochs: objects of numbers / arrays of numbers
};

// Collective. params/momentum: this rank's local members (devices_per_rank of them), all of
// one config, which the file records.
void write_checkpoint(const runtime::Context& ctx, const std::string& path, const CheckpointState& state,
                      const std::vector<models::CnnParams>& params, const std::vector<models::CnnParams>& momentum);

// Collective, before training: the folder of `path` must have room for one checkpoint of
// `members` members of `config` with `epochs` epochs of history (a new checkpoint is written
// beside the old one, then renamed onto it), else every rank throws a CollectiveError
// saying "No space left on device" with the bytes free and needed, naming --checkpoint.
void require_checkpoint_space(const runtime::Context& ctx, const std::string& path, int members,
                              const models::CnnConfig& config, int epochs);

// Collective. Rank 0 checks it against this run (members, CNN config, parameter count,
// defining options, "key=value" lines compared by key: the message names what differs; a line
// the checkpoint lacks matches when it is one of `when_absent`, the defaults of options made
// defining after it was written; the expected config is that of params); then every rank
// reads its own members' rows.
// Throws CollectiveError on every rank for a missing, corrupt or foreign checkpoint.
CheckpointState read_checkpoint(const runtime::Context& ctx, const std::string& path, const std::string& expected_options,
                                std::vector<models::CnnParams>& params, std::vector<models::CnnParams>& momentum,
                                const std::string& when_absent = "");

// A finished training is never replaced by accident: a run that would write a checkpoint
// where a file already is, without --resume, is refused unless --overwrite. Throws
// spmd::Error naming the option, the file and what it holds ("a checkpoint of 4 members
// after 12 epochs, written 3 h 5 min ago", or what else the file is); returns when nothing
// is there. No MPI (the option checks call it once per node).
void refuse_existing_checkpoint(const std::string& path, const std::string& option);

// Every member's parameters and the config they belong to, for spmd eval --model cnn.
struct CheckpointParams {
  models::CnnConfig config;
  std::vector<std::vector<float>> members;  // [members][config's parameter count]
};

// Collective: rank 0 checks the file, then every rank reads every member (collective
// MPI-IO reads; no broadcast of the whole ensemble).
CheckpointParams read_checkpoint_params(const runtime::Context& ctx, const std::string& path);

}  // namespace spmd::workloads
