#pragma once
// spmd model info's report: an ONNX model's description (models/onnx_info.hpp) as rank 0's
// text and as --json.
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/models/onnx_info.hpp"

namespace spmd::workloads {

std::string model_info_text(const models::OnnxModelInfo& info);
nlohmann::json model_info_json(const models::OnnxModelInfo& info);

}  // namespace spmd::workloads
