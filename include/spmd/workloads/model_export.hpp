#pragma once
// spmd export: what spmd trained, as an ONNX model any framework or inference server runs
// (models/onnx_export.hpp has the graphs). An ensemble checkpoint becomes the members' mean
// probabilities (or one member's); logreg weights become softmax(x W + b). The file states
// its input and provenance: a doc string and metadata_props (spmd version, model, input
// layout and scale, the training data and its fingerprint, class names where the training
// file has them).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spmd/runtime/context.hpp"

namespace spmd::data {
class OutputSet;
}

namespace spmd::workloads {

struct ExportRequest {
  std::string weights;        // an ensemble checkpoint or a logreg weights file
  std::string out;            // the .onnx file to write (atomic, through `outputs`)
  std::optional<int> member;  // ensembles: this member only (0-based)
};

struct ExportResult {
  std::string kind;         // "cnn-ensemble" or "logreg"
  std::string description;  // "2 members of the 28x28x1 conv 4,4 dense 16 classes 10 CNN"
  std::string input;        // "images float32 [batch, 28, 28, 1]"
  std::string output;       // "probabilities float32 [batch, 10]"
  std::int64_t bytes = 0;   // of the .onnx file
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Collective: rank 0 reads the weights, builds and checks the graph and stages the file in
// `outputs` (publish() makes it appear); every rank returns the same result. A file that is
// neither kind, a --member out of range or a graph the checker refuses ends every rank with
// a message naming the file.
ExportResult export_onnx(const runtime::Context& ctx, const ExportRequest& request, data::OutputSet& outputs);

}  // namespace spmd::workloads
