#pragma once
// pad_shard_unpad: flax.jax_utils.pad_shard_unpad for host arrays.
//
// Wraps a per-device step so that it can be called with any batch size b:
//  1. every batched argument must be an array with the same leading size b, else spmd::Error
//     "inconsistent batch sizes" naming each argument and its size. What flax marks static
//     (static_argnums) is simply captured by the step here: only batched arrays are passed;
//  2. the batch is padded to the next multiple of d (the local devices), then, with
//     min_device_batch = m, further so that every device gets at least m rows:
//     b_dev = max(ceil(b / d), m) (device_batch_for). Padding rows are zeros, or another byte
//     (Batched::padding_byte: a test aid, see there);
//  3. the step receives the batched arguments as views of shape [d, b_dev, ...],
//     device-major: device i holds rows i*b_dev .. (i+1)*b_dev - 1 (view.at(i) is device i's
//     shard, of which Shards::real_rows(i) leading rows are real);
//  4. operator() gathers each output of the step, [d, b_dev, ...], to [d*b_dev, ...] and cuts
//     it to its first b rows (unpad). A step whose result is not per example (flax's
//     static_return: metrics already psum-ed inside the step) calls shard() and returns what
//     it likes.
//
// With min_device_batch equal to the per-device batch size B and host batches of at most
// d*B rows, every call, the last short one too, runs with the one shape [d, B, ...].
//
// Zero-size batches (b = 0) are allowed: without min_device_batch the shards are [d, 0, ...]
// and the outputs [0, ...]; with min_device_batch = m they are [d, m, ...] of padding only,
// the same shape as the other steps (what a rank without data needs to keep in step).
//
// Memory: an argument that needs no padding (b == d*b_dev) is viewed in place, with no copy.
// Otherwise its rows are copied into a padding buffer owned by the wrapper and reused across
// calls, so the views are valid only until the next call, and one wrapper must not be called
// from two threads at once. An argument of which the step reads only each device's real rows
// (Padding::Unread: the features of an evaluation step, whose padding rows are never
// computed) is viewed in place whenever it has rows: its padding rows lie past the caller's
// rows and must not be read.
//
// Example (the eval step of Flax's full-dataset evaluation guide; the metrics captured):
//   PadShardUnpad wrapper(ctx.devices_per_rank());
//   auto out = wrapper({images, labels}, [&](const Shards& s) {
//     HostArray predictions(DType::Int32, {s.devices(), s.device_batch()});
//     ctx.pool().run([&](int dev) { ... s[0].at(dev) ... s.real_rows(dev) ... });
//     return std::vector<HostArray>{std::move(predictions)};
//   }, B);                                          // out[0]: [b] predictions, unpadded
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "spmd/sharding/host_array.hpp"

namespace spmd::sharding {

// Rows per device of a call with b real rows on d devices: max(ceil(b / d), m). The one rule
// of the step plan (step_plan.hpp) and of the wrapper.
std::int64_t device_batch_for(std::int64_t batch, int devices, std::int64_t min_device_batch = 0);

// One batched argument of a call.
struct Batched {
  enum class Padding : std::uint8_t {
    Filled,  // padding rows hold padding_byte (zeros in every product run)
    Unread,  // viewed in place (when b > 0); the step reads only each device's real rows
  };
  Batched(ConstHostView rows_, Padding padding_ = Padding::Filled, std::uint8_t byte = 0)  // NOLINT(google-explicit-constructor)
      : rows(std::move(rows_)), padding(padding_), padding_byte(byte) {}
  Batched(const HostArray& array) : Batched(array.view()) {}  // NOLINT(google-explicit-constructor)
  Batched(HostArray&&) = delete;  // the view would dangle: keep the array alive in a variable

  ConstHostView rows;  // [b, ...]
  Padding padding = Padding::Filled;
  // Product code pads with zeros; tests poison the padding (0xFF: float rows read as NaN,
  // int32 as -1) so that a padding row reaching a count, a sum or a prediction changes the result.
  std::uint8_t padding_byte = 0;
};

// What the step receives: the batched arguments as [d, b_dev, ...] views. Valid until the
// wrapper's next call.
class Shards {
 public:
  int devices() const { return devices_; }                     // d
  std::int64_t batch() const { return batch_; }                // b: real rows of the call
  std::int64_t device_batch() const { return device_batch_; }  // b_dev: rows per device, padding included
  // Device i's real rows: its leading rows; the rest of its shard is padding.
  std::int64_t real_rows(int device) const {
    return std::clamp<std::int64_t>(batch_ - device * device_batch_, 0, device_batch_);
  }
  std::size_t size() const { return arrays_.size(); }
  // Batched argument i, [d, b_dev, ...]; throws spmd::Error past the arguments.
  const ConstHostView& operator[](std::size_t i) const;

 private:
  friend class PadShardUnpad;
  int devices_ = 1;
  std::int64_t batch_ = 0;
  std::int64_t device_batch_ = 0;
  std::vector<ConstHostView> arrays_;
};

class PadShardUnpad {
 public:
  // d, the local devices; throws spmd::Error for devices < 1.
  explicit PadShardUnpad(int devices);

  // Steps 1-3 of the top of this file: checks, pads and shards the arguments (at least one).
  const Shards& shard(std::span<const Batched> args, std::int64_t min_device_batch = 0);
  const Shards& shard(std::initializer_list<Batched> args, std::int64_t min_device_batch = 0) {
    return shard(std::span<const Batched>(args.begin(), args.size()), min_device_batch);
  }

  // Step 4 for one output of the last shard(): [d, b_dev, ...] -> its first b rows of
  // [d*b_dev, ...], in place (no copy). Throws spmd::Error for another leading shape.
  void unpad(HostArray& output, std::size_t which = 0) const;

  // The whole wrapper: step(shards) returns per-device outputs, given back unpadded.
  template <class Step>
  std::vector<HostArray> operator()(std::span<const Batched> args, Step&& step, std::int64_t min_device_batch = 0) {
    std::vector<HostArray> outputs = step(shard(args, min_device_batch));
    for (std::size_t k = 0; k < outputs.size(); ++k) unpad(outputs[k], k);
    return outputs;
  }
  template <class Step>
  std::vector<HostArray> operator()(std::initializer_list<Batched> args, Step&& step, std::int64_t min_device_batch = 0) {
    return (*this)(std::span<const Batched>(args.begin(), args.size()), std::forward<Step>(step), min_device_batch);
  }

  int devices() const { return shards_.devices_; }

 private:
  ConstHostView shard_one(const Batched& arg, std::size_t slot, std::int64_t device_batch);

  Shards shards_;
  std::vector<HostArray> padding_buffers_;  // one per argument, reused across calls
};

}  // namespace spmd::sharding
