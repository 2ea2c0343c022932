#pragma once
// One ensemble member on one device, as the ensemble workload drives it: the member's
// parameters, momentum trace and buffers live on the device; batches come from and
// probabilities go to the host. The CPU engine wraps cnn_cpu.hpp; a CUDA engine
// (src/models/cnn_cuda.cu, later) implements the same interface with device buffers.
//
// An engine is used from one thread at a time (its device's worker thread).
#include <cstdint>
#include <memory>
#include <string>

#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/optim/sgd.hpp"

namespace spmd::models {

class CnnMemberEngine {
 public:
  virtual ~CnnMemberEngine() = default;

  virtual std::string describe() const = 0;  // e.g. "cpu (avx512 kernels)"
  virtual int max_batch() const = 0;         // largest batch of evaluate()
  virtual int max_train_batch() const = 0;   // largest batch of train_step()
  virtual std::int64_t device_bytes() const = 0;

  // Host <-> device copies of the member's state, in CnnParams layout: after cnn_init, for
  // checkpoints, for gathers. get_state writes only the non-null arguments.
  virtual void set_state(const CnnParams& params, const CnnParams& trace) = 0;
  virtual void get_state(CnnParams* params, CnnParams* trace) const = 0;

  // One SGD-momentum step on a host batch (images [batch, 28, 28, 1], labels [batch], every
  // row counts). Returns the mean loss before the update; probs_out [batch, 10] (host,
  // nullable) receives softmax(logits) of the same forward pass.
  virtual float train_step(const float* images, const std::int32_t* labels, int batch,
                           const optim::SgdMomentum& opt, float* probs_out) = 0;

  // Forward pass: loss summed over counted rows (mask nullable, labels nullable for
  // probabilities only) and probs_out [batch, 10] (host, nullable) for every row.
  virtual CnnLossSum evaluate(const float* images, const std::int32_t* labels, const std::uint8_t* mask, int batch,
                              float* probs_out) = 0;
};

// The CPU engine; its workspace is allocated here, once. Throws spmd::Error for bad sizes or
// an unsupported ISA.
std::unique_ptr<CnnMemberEngine> make_cnn_cpu_engine(int max_batch, int max_train_batch,
                                                     cnn_cpu::Isa isa = cnn_cpu::Isa::Auto);

}  // namespace spmd::models
