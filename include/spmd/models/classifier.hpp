#pragma once
// A classifier as the eval workload sees it: per-device predictors that map a batch of
// samples to class indices. The models (zero, logistic regression, CNN ensemble) implement
// it; eval knows nothing else about them. No MPI here.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/runtime/devices.hpp"

namespace spmd::models {

// Samples stored one byte per value (uint8 images): value v stands for table[v]. The table
// is data::FeatureDecoder's (the loader's float(v / 255.0), or --input-scale's factor),
// so decoding through it anywhere gives the loader's bits.
using ByteTable = std::array<float, 256>;

// Runs on one device's worker thread; owns that device's buffers (allocated once for
// max_rows and reused every call).
class DevicePredictor {
 public:
  virtual ~DevicePredictor() = default;
  // samples: [rows, sample_size] float32 row-major on the host, rows <= max_rows.
  // classes_out: [rows]. probs_out: nullptr, or [rows, classes] (host) for each row's class
  // probabilities (a softmax; the ensemble's mean of its members'). Every row is predicted
  // on its own: its outputs do not depend on the other rows of the batch or its size.
  virtual void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) = 0;

  // Whether predict_bytes() takes byte samples where the model computes. A GPU does: a
  // quarter of the float bytes cross PCIe and a kernel decodes them; so does an ONNX graph on
  // the host, into its input tensor chunk by chunk (a pass over the floats less). Otherwise
  // (false: the built-in models on the CPU) the caller decodes on the host, where a
  // vectorised loop beats a table, and calls predict().
  virtual bool decodes_bytes() const { return false; }
  // predict() on samples [rows, sample_size] of bytes, value v read as table[v]: the same
  // outputs as predict() on the decoded floats, bit for bit. Only where decodes_bytes();
  // elsewhere it throws spmd::Error.
  virtual void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table,
                             std::int32_t* classes_out, float* probs_out);

  // Rows predicted so far whose scores (logits or probabilities, what the class is chosen
  // from) held a NaN or an infinity: their class is still counted, and eval reports them.
  std::int64_t non_finite_rows() const { return non_finite_rows_; }

 protected:
  std::int64_t non_finite_rows_ = 0;
};

class Classifier {
 public:
  virtual ~Classifier() = default;
  virtual std::string describe() const = 0;  // "logreg W[784,10] from w.h5"
  virtual int classes() const = 0;
  // Throws spmd::Error naming the data file when the samples do not fit the model
  // (e.g. the CNN wants [28, 28, 1]; logreg wants F features).
  virtual void check_sample_shape(const std::vector<std::int64_t>& sample_shape, const std::string& data_path) const = 0;
  virtual std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t max_rows) const = 0;
  // For --dry-run: bytes per device for parameters and for the buffers of a batch of rows.
  virtual std::int64_t parameter_bytes() const = 0;
  virtual std::int64_t workspace_bytes(std::int64_t rows) const = 0;
  // Why the model takes the stored feature values as they are (an ONNX model whose input is
  // uint8 images scales them in its graph), or "" for a model fed float features after
  // --input-scale. Eval then reads integer features unscaled and refuses other ones.
  virtual std::string takes_stored_values() const { return ""; }
  // Whether its predictors on the host take uint8 samples as bytes (DevicePredictor::
  // decodes_bytes): eval then holds no decoded float copy of a batch (--dry-run's memory).
  virtual bool host_decodes_bytes() const { return false; }
};

// The fake model of Flax's full-dataset evaluation guide: always class 0 (probability 1).
std::unique_ptr<Classifier> make_zero_classifier(int classes);

}  // namespace spmd::models
