#pragma once
// pad_shard_unpad: flax.jax_utils.pad_shard_unpad for host arrays.
//
// Wraps a per-device step so that it can be called with any batch size b:
//  1. every argument not listed as static (by position in static_argnums, by name in
//     static_argnames) must be an array with the same leading size b, else spmd::Error
//     "inconsistent batch sizes" naming each batched argument and its size;
//  2. the batch is padded with zero rows to the next multiple of d (the local devices),
//     then, with the call-time option min_device_batch = m, further so that every device
//     gets at least m rows: b_dev = max(ceil(b / d), m). (Arg::padded_with fills an
//     argument's padding rows with another byte instead: a test aid, see there);
//  3. the wrapped function receives each batched argument as a read-only view of shape
//     [d, b_dev, ...], device-major: device i holds rows i*b_dev .. (i+1)*b_dev - 1
//     (view.at(i) is device i's [b_dev, ...] shard). Static arguments are passed untouched;
//  4. unless static_return, every output must have shape [d, b_dev, ...] (what a per-device
//     step writes); it is gathered to [d*b_dev, ...] and cut to its first b rows. The output
//     dtype is whatever the wrapped function produced (a row-wise function of the input
//     keeps the input dtype). With static_return the outputs are returned as given (typical:
//     metrics already psum-ed inside the step).
//
// With min_device_batch equal to the per-device batch size B and host batches of at most
// d*B rows, every call, the last short one too, runs with the one shape [d, B, ...].
//
// Zero-size batches (b = 0) are allowed: without min_device_batch the shards are [d, 0, ...]
// and the outputs [0, ...]; with min_device_batch = m they are [d, m, ...] of padding only,
// the same shape as the other steps (what a rank without data needs to keep in step).
// A call with no batched argument at all throws spmd::Error (there is no b to pad to).
//
// Memory: a batched argument that needs no padding (b == d*b_dev) is viewed in place, with
// no copy. Otherwise its rows are copied into a padding buffer owned by the wrapper and
// reused across calls, so the views handed to the wrapped function are valid only during
// that call, and one wrapper must not be called from two threads at once.
//
// Example (the eval step of Flax's full-dataset evaluation guide, metrics as static argument 0 and static_return):
//   PadShardUnpad step([&](const ShardedArgs& a) {
//                        const auto images = a.arg(1).array();        // [d, b_dev, 28, 28, 1]
//                        ctx.pool().run([&](int dev) { ... images.at(dev) ... });
//                        return std::vector<HostArray>{updated_metrics};
//                      },
//                      {.devices = ctx.devices_per_rank(), .static_argnums = {0}, .static_return = true});
//   auto out = step({Arg::ref(metrics), images, labels, mask}, {}, {.min_device_batch = B});
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "spmd/sharding/host_array.hpp"

namespace spmd::sharding {

// One argument: a host array (batched or static) or an opaque static object held by
// reference (params, metric state), which pad_shard_unpad passes through without looking.
class Arg {
 public:
  Arg(ConstHostView array) : array_(std::move(array)), is_array_(true) {}  // NOLINT(google-explicit-constructor)
  Arg(const HostArray& array) : Arg(array.view()) {}                         // NOLINT(google-explicit-constructor)
  Arg(HostArray&&) = delete;  // the view would dangle: keep the array alive in a variable

  // An opaque object by reference; it must outlive the call. get<T>() gives it back.
  template <class T>
  static Arg ref(const T& object) {
    Arg a;
    a.object_ = &object;
    a.type_ = &typeid(T);
    return a;
  }
  template <class T>
  static Arg ref(const T&& object) = delete;  // no temporaries: the reference would dangle

  // The same argument, its padding rows filled with `byte` instead of zeros. Product code
  // pads with zeros; tests poison the padding (0xFF: float rows read as NaN, int32 as -1) so
  // that a padding row reaching a count, a sum or a prediction changes the result.
  Arg padded_with(std::uint8_t byte) const {
    Arg a = *this;
    a.padding_byte_ = byte;
    return a;
  }
  std::uint8_t padding_byte() const { return padding_byte_; }

  bool is_array() const { return is_array_; }
  // The array; throws spmd::Error for an opaque object.
  const ConstHostView& array() const;
  // The opaque object; throws spmd::Error for an array or a different type T.
  template <class T>
  const T& get() const {
    if (is_array_ || *type_ != typeid(T))
      throw Error(std::string("pad_shard_unpad: argument read as ") + typeid(T).name() + " but holds " + held_type());
    return *static_cast<const T*>(object_);
  }
  std::string held_type() const;

 private:
  Arg() = default;
  ConstHostView array_;
  const void* object_ = nullptr;
  const std::type_info* type_ = nullptr;
  bool is_array_ = false;
  std::uint8_t padding_byte_ = 0;
};

using NamedArgs = std::map<std::string, Arg>;

// What the wrapped function receives; it refers to the wrapper's argument lists and is valid
// only during the call.
class ShardedArgs {
 public:
  ShardedArgs(std::span<const Arg> args, const NamedArgs& kwargs, int devices, std::int64_t batch,
              std::int64_t device_batch)
      : args_(args), kwargs_(kwargs), devices_(devices), batch_(batch), device_batch_(device_batch) {}

  // Positional argument i / keyword argument `name`: batched ones as [d, b_dev, ...] views,
  // static ones as given. Throw spmd::Error when absent.
  const Arg& arg(std::size_t i) const;
  const Arg& kwarg(const std::string& name) const;
  std::size_t arg_count() const { return args_.size(); }
  bool has_kwarg(const std::string& name) const { return kwargs_.count(name) != 0; }

  int devices() const { return devices_; }                     // d
  std::int64_t batch() const { return batch_; }                // b: real rows of the call
  std::int64_t device_batch() const { return device_batch_; }  // b_dev: rows per device, padding included

 private:
  std::span<const Arg> args_;
  const NamedArgs& kwargs_;
  int devices_;
  std::int64_t batch_;
  std::int64_t device_batch_;
};

struct PadShardUnpadOptions {
  int devices = 1;                            // d, the local devices (>= 1)
  std::vector<int> static_argnums = {0};      // positions passed through (>= 0; beyond the call's arguments: ignored, as in flax)
  std::vector<std::string> static_argnames;   // keyword names passed through
  bool static_return = false;                 // return the outputs as the wrapped function gave them
};

struct PadShardUnpadCallOptions {
  std::int64_t min_device_batch = 0;  // m: at least this many rows per device; 0 = no minimum
};

class PadShardUnpad {
 public:
  using Wrapped = std::function<std::vector<HostArray>(const ShardedArgs&)>;

  // Throws spmd::Error for devices < 1, a negative static_argnums entry or an empty function.
  PadShardUnpad(Wrapped wrapped, PadShardUnpadOptions options);

  // Pads, shards, calls, gathers, un-pads (see the top of this file). Not re-entrant.
  std::vector<HostArray> operator()(const std::vector<Arg>& args, const NamedArgs& kwargs = {},
                                    PadShardUnpadCallOptions call = {});

  const PadShardUnpadOptions& options() const { return options_; }
  // The rows per device a call with b real rows uses: max(ceil(b / d), m).
  std::int64_t device_batch_for(std::int64_t batch, std::int64_t min_device_batch = 0) const;

 private:
  bool is_static_position(std::size_t i) const;
  bool is_static_name(const std::string& name) const;
  ConstHostView shard(const Arg& arg, std::size_t slot, std::int64_t device_batch);

  // A batched argument; its label is spelled out only for an error message.
  struct Batched {
    std::size_t position;     // for a positional argument
    const std::string* name;  // for a keyword argument, else nullptr
    const Arg* arg;
    std::string label() const;
  };

  Wrapped wrapped_;
  PadShardUnpadOptions options_;
  std::vector<HostArray> padding_buffers_;  // one per batched argument, reused across calls
  // Per-call lists, kept so that a call allocates nothing once the first has run.
  std::vector<Batched> batched_;
  std::vector<Arg> sharded_args_;
  NamedArgs sharded_kwargs_;
};

// The flax spelling: pad_shard_unpad(fn, options)(args, kwargs, {.min_device_batch = m}).
inline PadShardUnpad pad_shard_unpad(PadShardUnpad::Wrapped wrapped, PadShardUnpadOptions options = {}) {
  return PadShardUnpad(std::move(wrapped), std::move(options));
}

}  // namespace spmd::sharding
