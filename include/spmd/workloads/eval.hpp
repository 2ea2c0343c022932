#pragma once
// spmd eval: full-dataset evaluation on any layout of ranks x devices x batch size.
//
// Strategies (Flax's full-dataset evaluation guide: the problem and its fixes):
//  keep-remainder  plain batches, a smaller last one (2 shapes); one device in total only.
//  drop-remainder  whole steps only; reports the examples it dropped (a wrong total).
//  pad             pad_shard_unpad with min_device_batch = B: one shape, exact totals; the
//                  step count comes from global sizes, so every rank runs the same steps.
//  pad-metrics     as pad, with correct/total computed inside the step and psum-ed
//                  (static_return).
//  infinite-pad    endless masked padding and a count barrier (psum of real rows each
//                  step, all stop at 0): correct even when per-rank counts are unknown in
//                  advance (--drop-label). pad and pad-metrics detect that case and stop
//                  with an error that points here. The barrier counts --count-window steps
//                  per allreduce (same stopping step, fewer synchronisations).
// Every strategy runs the one evaluation loop (eval_loop.hpp); a strategy only picks the step
// plan (sharding/step_plan.hpp) and, for pad-metrics, the psum inside the step.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/data/dataset.hpp"
#include "spmd/data/sparse_matrix.hpp"
#include "spmd/models/classifier.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/large_pages.hpp"
#include "spmd/workloads/eval_outputs.hpp"
#include "spmd/workloads/option_list.hpp"

namespace spmd::workloads {

enum class EvalStrategy { KeepRemainder, DropRemainder, Pad, PadMetrics, InfinitePad };
const char* to_string(EvalStrategy s);
EvalStrategy parse_eval_strategy(const std::string& text);  // throws spmd::Error

// Defaults are the member initializers; constraints and help are in the declarations
// (eval_options.cpp, workloads/option_list.hpp).
struct EvalOptions {
  std::string data;
  data::DatasetKeys keys{"images", "labels"};  // resolved from the file and the key options
  std::string model = "zero";                  // a row of eval_models.hpp
  std::string weights;                         // the model's file ("": none)
  int classes = 10;                            // --model zero
  std::int64_t per_device_batch = 512;
  EvalStrategy strategy = EvalStrategy::Pad;
  std::int64_t min_device_batch = 0;  // pad/pad-metrics: 0 means per_device_batch (one shape)
  int count_window = 16;              // infinite-pad: steps whose real rows one allreduce counts (1: every step)
  std::optional<int> drop_label;      // do not evaluate the rows with this label
  data::FeatureScale input_scale;     // images set for the CNN (values beyond [0, 1] refused under auto)
  std::string onnx_output;                                     // onnx: the graph output read ("": the first)
  models::OnnxOutput model_output = models::OnnxOutput::Auto;  // onnx: how its output is read
  std::vector<float> input_mean, input_std;                    // onnx: normalisation outside the graph
  std::string predictions;            // the predictions file ("": none)
  bool dry_run = false;
  bool benchmark = false;
  int repeat = 1001;                  // --benchmark rounds
  int passes = 0;                     // --benchmark passes per sample (0: about 2 ms)
  double progress_seconds = 5.0;
  bool quiet = false;

  static const std::vector<Option<EvalOptions>>& declared();
  void validate() const;  // the rules between members; throws spmd::Error naming the option
  // The rows of a device's padded batch: per_device_batch, or min_device_batch when larger
  // (pad, pad-metrics).
  std::int64_t device_batch() const;
};

// A rank's share of the evaluation. Its labels and sizes are in memory (4 bytes per row);
// its features stay in the file, and every pass streams them in blocks through
// prefetch_to_device (file_row_blocks.hpp): a rank holds a few blocks, never its shard.
struct EvalShard {
  data::LoadedShard shard;  // labels [rows] of the evaluated rows, sizes, classes; no features
  std::string path;                    // the file and the dataset the passes stream
  std::string features_key;
  data::DatasetShape features_shape;   // as probed: element type, sample shape
  std::optional<data::SparseMatrixInfo> sparse;  // a CSR group, streamed as dense float32 rows (data/feature_source.hpp)
  std::int64_t filtered = 0;  // rows this rank removed with --drop-label
  // This rank's rows of the file are [shard.first_row, shard.first_row + file_rows). With
  // --drop-label, kept[i] is evaluated row i's index among them and file_labels holds every
  // file row's label; without, both are empty (row i is file row i).
  std::int64_t file_rows = 0;
  std::vector<std::int64_t> kept;
  std::vector<std::int32_t> file_labels;
  std::int64_t file_row_of(std::int64_t row) const { return kept.empty() ? row : kept[static_cast<std::size_t>(row)]; }
  // with_features_in_memory: the evaluated rows' features as stored ([rows, sample_size] of
  // features_shape.features_type), which passes then read instead of the file.
  bool features_in_memory = false;
  runtime::LargeVector<std::byte> features;
};

struct EvalResult {
  std::int64_t correct = 0;
  std::int64_t total = 0;       // real examples counted, over all ranks
  std::int64_t dataset_rows = 0;  // N in the file (before --drop-label)
  std::int64_t filtered_rows = 0; // examples removed by --drop-label, over all ranks
  std::int64_t dropped = 0;     // examples never evaluated (drop-remainder), over all ranks
  std::int64_t steps = 0;       // steps every rank ran
  std::int64_t planned_steps = -1;  // steps the pass would have run (-1: data-dependent, infinite-pad)
  int stop_signal = 0;          // a stop agreed before the end (runtime/stop_request.hpp): the pass is partial
  std::map<std::int64_t, std::int64_t> batch_shapes;  // rows per device -> steps run with it
  std::vector<std::int64_t> examples_per_rank;         // real examples each rank evaluated
  std::int64_t padded_rows = 0;  // zero rows run on devices, over all ranks
  std::int64_t non_finite_rows = 0;  // real rows whose scores held a NaN or an infinity, over all ranks
  ConfusionMatrix confusion;     // over all ranks (correct = its trace)
  double seconds = 0;            // the evaluation loop (not loading), max over ranks
  double cpu_seconds = 0;        // process CPU time of the loop (all device threads), max over ranks
  double accuracy() const { return total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
  double examples_per_second() const { return seconds > 0 ? static_cast<double>(total) / seconds : 0.0; }
};


// Throws CollectiveError for a layout the strategy cannot run on (keep-remainder on more than
// one device in total): every rank reaches the same verdict from sizes alone. run_eval checks
// it too; the CLI calls it before any work.
void require_layout_fits(const runtime::Context& ctx, const EvalOptions& options);

// Collective. Reads this rank's split of the file's labels (and applies --drop-label); the
// features are checked now only where the check must see them all (--input-scale auto on
// images: data/dataset.hpp's FeatureForm::LeftInFile), else as each pass streams them.
// Features that are a CSR matrix (data/sparse_matrix.hpp) are streamed as dense float32
// rows; their labels are a column of their own (an integer dataset or an AnnData
// categorical obs column: data/label_column.hpp).
EvalShard load_eval_shard(const runtime::Context& ctx, const EvalOptions& options, const models::Classifier& model);

// Collective. The same shard with its features read once into memory, as stored (uint8
// images: a byte a pixel), and checked as a pass checks them. For --benchmark: its hundreds
// of passes of a few ms measure the padding, which a file read per pass would drown.
EvalShard with_features_in_memory(const runtime::Context& ctx, const EvalShard& shard);

// Called after every step of run_eval on the ranks that give it (rank 0, for a display):
// `done` of `total` rows of the file, and the seconds since the loop started. done is an
// estimate that costs no communication: this rank's fraction of its own rows done, times the
// file's rows (the shares differ by at most one row; with --drop-label, by what each rank
// drops). It is the job's progress when the ranks keep pace; a slower rank lags this one by
// at most the steps between two collectives of the strategy (pad-metrics: none, a psum every
// step; infinite-pad: --count-window; pad, drop-remainder: the read agreement, every
// kAgreementSteps steps or more), and at the end this rank waits for it at total.
using EvalProgress = std::function<void(std::int64_t done, std::int64_t total, double seconds)>;

// Collective. Evaluates the shard, streaming its rows from the file (or from memory:
// with_features_in_memory); identical integer results on every layout. A row that cannot be
// read or is refused (a damaged file, a non-finite value) on any rank ends every rank with
// that rank's message (spmd::CollectiveError), within a block of steps (kAgreementSteps at
// least). predictions (may be nullptr): receives every evaluated row's outputs. progress
// (may be empty): see EvalProgress.
EvalResult run_eval(const runtime::Context& ctx, const EvalOptions& options, const models::Classifier& model,
                    const EvalShard& shard, PredictionRecorder* predictions = nullptr, const EvalProgress& progress = {});

// Collective. The plain forward over the same shard: batches of B per device, the last
// smaller, no masks, no padding, no count barrier: the reference for the padding cost.
EvalResult run_plain_forward(const runtime::Context& ctx, const EvalOptions& options, const models::Classifier& model,
                             const EvalShard& shard);

}  // namespace spmd::workloads
