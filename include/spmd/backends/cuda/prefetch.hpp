#pragma once
// prefetch_to_device on a GPU: keeps `depth` batches already copied to one CUDA device
// ahead of the consumer, so that the host-to-device copy of batch k+1 overlaps the compute
// on batch k (flax: depth 2 is right on GPUs). The CPU Prefetcher (prefetch.hpp) hands over
// host items; this one hands over device memory.
//
// Pipeline, per batch, on the prefetcher's own thread:
//   producer() -> HostBatch (host arrays)  --memcpy-->  pinned staging buffers of a slot
//   --cudaMemcpyAsync on a dedicated copy stream-->  device buffers of the slot  --> event
// The slots form a ring of depth + 1: `depth` filled and queued, one held by the consumer.
//
// Semantics (those of Prefetcher, plus the device side):
//  - order is preserved; next() returns nullopt once the producer returned nullopt;
//  - bounded: at most `depth` batches are produced and not yet taken by next(); the producer
//    is not called again until the consumer makes room;
//  - an exception thrown by the producer, a batch that does not fit the slots, or a failed
//    CUDA call on the prefetch thread ends production; next() first returns the batches
//    made before it, then rethrows it (on this and every later call);
//  - the destructor stops the thread even when not drained (a producer call in progress is
//    allowed to finish), waits for the GPU work that still reads the slots, and frees them.
//
// Ownership and lifetime:
//  - HostBatch: the producer owns the host memory its spans point to. The prefetch thread
//    copies it into pinned memory right after the producer returns and before calling it
//    again, so the spans must stay valid until the producer's next call (or the end). A
//    producer that allocates per batch can park the allocation in HostBatch::owner, which is
//    released as soon as the bytes are staged.
//  - GpuBatch is a view of memory the prefetcher owns. It stays valid until the
//    following next() call or the prefetcher's destruction, whichever comes first.
//  - The copy is asynchronous: before using the arrays, call batch.wait_on(stream) for
//    every stream that will read them (the stream waits on the GPU; the host does not
//    block), or batch.synchronize() for host-side use. Those streams must belong to the
//    prefetcher's GPU and outlive the batch's release. On the following next() call the
//    prefetcher marks the point each such stream has reached, and refills the slot only
//    after that point: work already queued on them may keep reading the batch. Work on
//    streams NOT passed to wait_on must be complete before the following next() call.
//  - Every device pointer is 256-byte aligned (each array starts on its own 256-byte
//    boundary of a cudaMalloc allocation); an array of 0 bytes has data == nullptr.
//
// Threads: next(), wait_on() and the destructor are for one consumer thread. Like the other
// GPU objects, the constructor and each of them make the prefetcher's GPU the calling
// thread's current one (and leave it so: the consumer of a device's batches works on that
// GPU). The producer runs on the prefetch thread with the prefetcher's GPU current; it
// must not call MPI (collectives stay on the main thread, in the same order on every rank).
//
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "spmd/runtime/devices.hpp"

namespace spmd::sharding {

// One host array of a batch: `bytes` bytes at `data` (any host memory, pageable or
// pinned; data may be nullptr when bytes == 0).
struct HostBytes {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// What the producer returns: the batch's arrays in a fixed order (array i lands in the
// slot's array i, whose capacity was given to the constructor), a tag of the caller's
// choosing (a step number, a shard id) handed back with the device batch, and optionally
// the owner of the host memory, dropped once the bytes are staged.
struct HostBatch {
  std::vector<HostBytes> arrays;
  std::int64_t tag = 0;
  std::shared_ptr<const void> owner;
};

// One device array of a batch: `bytes` bytes at `data` in the prefetcher's GPU memory.
struct DeviceBytes {
  void* data = nullptr;
  std::size_t bytes = 0;
  // The same pointer, typed (the data is 256-byte aligned, so any element type fits).
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

namespace detail {
class DevicePrefetcherState;
}

// A batch on the GPU, as returned by DevicePrefetcher::next(). A view: see the header
// comment for how long it stays valid and which streams may read it.
class GpuBatch {
 public:
  std::size_t size() const { return arrays_.size(); }  // number of arrays
  const DeviceBytes& operator[](std::size_t i) const { return arrays_.at(i); }
  const std::vector<DeviceBytes>& arrays() const { return arrays_; }
  std::int64_t tag() const { return tag_; }
  // Position in the stream of batches: 0 for the first one next() returned.
  std::int64_t index() const { return index_; }
  // Recorded on the copy stream after the batch's last copy (for callers that manage their
  // own waits; wait_on is the usual way).
  cudaEvent_t copied_event() const { return copied_; }

  // Makes `stream` (a stream of the prefetcher's GPU; 0 = its legacy default stream) wait
  // for the copy on the GPU, and remembers the stream so that the slot is not refilled
  // before the work queued on it by the following next() call has run. Call it before
  // queueing work that reads the arrays. Throws spmd::Error for a batch that was already
  // released (a later next() was called), for a stream of another GPU, or when a CUDA call
  // fails.
  void wait_on(cudaStream_t stream) const;
  // Blocks the calling thread until the copy is complete; a failed copy becomes an
  // spmd::Error.
  void synchronize() const;

 private:
  friend class detail::DevicePrefetcherState;
  GpuBatch() = default;  // made by the prefetcher only
  detail::DevicePrefetcherState* state_ = nullptr;
  std::size_t slot_ = 0;
  std::int64_t index_ = 0;
  std::int64_t tag_ = 0;
  cudaEvent_t copied_ = nullptr;
  std::vector<DeviceBytes> arrays_;
};

class DevicePrefetcher {
 public:
  using Producer = std::function<std::optional<HostBatch>()>;

  // Allocates depth + 1 slots on `device`'s GPU, each holding array_capacities.size()
  // arrays of array_capacities[i] bytes (pinned host staging plus device memory), and
  // starts the prefetch thread. Throws spmd::Error, before any CUDA call, for depth < 1, an
  // empty producer, no arrays, or capacities whose sum overflows; then, with a clear
  // message, when `device` is not a usable GPU (CPU backend, no GPU or driver, ordinal out
  // of range); then for failed allocations (the message names the size).
  DevicePrefetcher(const runtime::DeviceInfo& device, Producer producer, std::size_t depth,
                   std::vector<std::size_t> array_capacities);
  ~DevicePrefetcher();
  // Movable (the thread and the slots stay where they are; batches already handed out stay
  // valid); not copyable.
  DevicePrefetcher(DevicePrefetcher&&) noexcept;
  DevicePrefetcher& operator=(DevicePrefetcher&&) noexcept;
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // Releases the batch returned by the previous call (see wait_on), then returns the next
  // batch in producer order, or nullopt once the producer said so. Blocks while no batch is
  // ready and the producer is still running. Rethrows the producer's exception, a slot
  // overflow or a CUDA error after the batches made before it.
  std::optional<GpuBatch> next();

  std::size_t depth() const;
  const runtime::DeviceInfo& device() const;
  const std::vector<std::size_t>& array_capacities() const;

 private:
  std::unique_ptr<detail::DevicePrefetcherState> state_;
};

// The flax spelling, for a GPU device.
inline DevicePrefetcher prefetch_to_device(const runtime::DeviceInfo& device, DevicePrefetcher::Producer producer,
                                           std::size_t size, std::vector<std::size_t> array_capacities) {
  return DevicePrefetcher(device, std::move(producer), size, std::move(array_capacities));
}

}  // namespace spmd::sharding

