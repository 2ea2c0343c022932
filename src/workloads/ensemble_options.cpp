#include "spmd/workloads/ensemble_options.hpp"

#include <algorithm>

#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/checkpoint.hpp"

namespace spmd::workloads {

namespace {
// "32,64" -> {32, 64}, as Flax's `features` of each layer; "none" (or "") -> {} when allowed.
std::vector<int> parse_widths(const std::string& text, const std::string& name, bool may_be_empty) {
  std::vector<int> widths;
  if (text.empty() || text == "none") {
    if (!may_be_empty) throw Error("--" + name + " needs at least one width (e.g. 32,64)");
    return widths;
  }
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1 || value > 65536)
      throw Error("--" + name + " must be a comma-separated list of widths between 1 and 65536 (got '" + text + "')");
    widths.push_back(static_cast<int>(value));
    start = comma + 1;
  }
  return widths;
}
std::vector<int> conv_widths(const std::string& text) { return parse_widths(text, "conv-features", false); }
std::vector<int> dense_widths(const std::string& text) { return parse_widths(text, "dense-features", true); }
std::string widths_text(const std::vector<int>& widths) {
  std::string text;
  for (int w : widths) text += (text.empty() ? "" : ",") + std::to_string(w);
  return text.empty() ? "none" : text;
}
}  // namespace

const std::vector<Option<EnsembleOptions>>& EnsembleOptions::declared() {
  using namespace rule;
  using data::FeatureScale;
  static const std::vector<Option<EnsembleOptions>> list{
      {"train", SPMD_MEMBER(train), "HDF5 training set: images [N,H,W,C] or [N,H,W] (channels last), labels [N] (required)",
       required | input_file | mpi_io | defines},
      {"test", SPMD_MEMBER(test), "HDF5 test set, same layout (required)", required | input_file | mpi_io},
      {"epochs", SPMD_MEMBER(epochs), "epochs to train in total (a resumed run continues up to this)", positive},
      {"batch-size", SPMD_MEMBER(batch_size), "training batch, the same for every member", positive | defines},
      {"learning-rate", SPMD_MEMBER(sgd.learning_rate), "SGD learning rate (> 0)", defines},
      {"momentum", SPMD_MEMBER(sgd.momentum), "SGD momentum in [0, 1)", defines},
      {"seed", SPMD_MEMBER(seed), "root seed: member g uses the g-th key split from it", defines},
      {"train-limit", SPMD_MEMBER(train_limit), "use only the first N training examples (0: all)", non_negative | defines},
      {"test-limit", SPMD_MEMBER(test_limit), "evaluate only the first N test examples (0: all)", non_negative},
      {"eval-batch", SPMD_MEMBER(eval_batch), "test-set batch per device", positive},
      {"conv-features", SPMD_TEXT(model.conv_features, widths_text, conv_widths),
       "output channels of each 3x3 conv layer (each followed by ReLU and 2x2 average pooling), input side first"},
      {"dense-features", SPMD_TEXT(model.dense_features, widths_text, dense_widths),
       "widths of the hidden dense layers (ReLU) before the classifier; 'none' for no hidden layer"},
      {"classes", SPMD_MEMBER(model.classes), "number of classes (0: 1 + the largest training label)",
       non_negative | at_most(data::kMaxClasses, "labels are class indices below it")},
      {"input-scale", SPMD_TEXT(input_scale, FeatureScale::text_of, FeatureScale::parse_images),
       "how stored features become float32: auto (uint8 / 255; other types as stored; images of another type beyond "
       "[0, 1] are refused), none (as stored, uint8 too), or a factor such as 1/255",
       defines},
      {"checkpoint", SPMD_MEMBER(checkpoint), "HDF5 checkpoint written after every epoch and on SIGTERM/SIGINT (atomic)",
       output_file | mpi_io},
      {"resume", SPMD_MEMBER(resume), "continue from --checkpoint (refused if it comes from other options)"},
      {"overwrite", SPMD_MEMBER(overwrite),
       "replace an existing --checkpoint with a new training (without it, or --resume, an existing file is refused)"},
      {"metrics-csv", SPMD_MEMBER(metrics_csv), "per-epoch CSV of the metrics", output_file},
      {"progress-every", SPMD_MEMBER(progress_every), "print a progress line every N steps (0: 10 lines per epoch)",
       non_negative},
      {"quiet", SPMD_MEMBER(quiet), "no progress lines, only the start-up table, the epoch rows and the summary"},
  };
  return list;
}

void EnsembleOptions::validate() const {
  if (quiet && progress_every != 0)
    throw Error("--quiet and --progress-every contradict each other: give one of them");
  optim::validate(sgd);
  if (resume) {
    if (checkpoint.empty()) throw Error("--checkpoint is required: --resume continues from it");
    data::require_readable_file("checkpoint", checkpoint);
    if (overwrite) throw Error("--resume and --overwrite contradict each other: continue the checkpoint, or replace it");
  } else if (!checkpoint.empty() && !overwrite) {
    refuse_existing_checkpoint(checkpoint, "checkpoint");
  }
}

std::string ensemble_defining_options(const EnsembleOptions& o, int members) {
  return "members=" + std::to_string(members) + "\n" + defining_lines(EnsembleOptions::declared(), o, data::checkpoint_data_identity);
}

std::string ensemble_defining_defaults() {
  return defining_lines(EnsembleOptions::declared(), EnsembleOptions{}, [](const std::string&) { return std::string(); });
}

}  // namespace spmd::workloads
