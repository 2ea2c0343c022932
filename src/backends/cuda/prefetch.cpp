// No kernels here, so plain C++ against the CUDA runtime API (g++ warns more than nvcc).
#include "spmd/backends/cuda/prefetch.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "spmd/runtime/check.hpp"
#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace spmd::sharding {

namespace {

constexpr const char* kWhat = "CUDA prefetcher";
// Every array starts on this boundary of the slot's allocation (cudaMalloc's own
// alignment), so a device pointer suits any element type and vectorised loads.
constexpr std::size_t kArrayAlignment = 256;

// A CUDA event without timing (cheaper to record and wait on). Created on the current GPU.
class CudaEvent {
 public:
  explicit CudaEvent(const char* what) {
    SPMD_CHECK_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), what);
  }
  ~CudaEvent() {
    if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

std::string where(const runtime::DeviceInfo& device) {
  return runtime::rank_tag() + ": " + kWhat + " on device " + std::to_string(device.global_index) + " ('" +
         device.name + "')";
}

}  // namespace

namespace detail {

class DevicePrefetcherState {
 public:
  DevicePrefetcherState(const runtime::DeviceInfo& device, DevicePrefetcher::Producer producer, std::size_t depth,
                        std::vector<std::size_t> capacities)
      : device_(device), producer_(std::move(producer)), depth_(depth), capacities_(std::move(capacities)) {
    // Options first, before any CUDA call (they need no GPU to be wrong).
    if (depth_ < 1)
      throw Error("prefetch_to_device: size (prefetch depth) must be >= 1, got " + std::to_string(depth_));
    if (!producer_) throw Error("prefetch_to_device: the producer function is empty");
    if (capacities_.empty())
      throw Error("prefetch_to_device: array_capacities is empty; a batch needs at least one array");
    plan_slot_layout();

    tensor::use_cuda_device(device_, kWhat);  // the clear message when there is no usable GPU
    try {
      copy_stream_.emplace();
      const std::size_t slot_count = depth_ + 1;  // depth queued, one held by the consumer
      slots_.reserve(slot_count);
      for (std::size_t s = 0; s < slot_count; ++s)
        slots_.push_back(Slot{tensor::PinnedBuffer<std::byte>(slot_bytes_, "a prefetch slot's pinned staging buffer"),
                              tensor::DeviceBuffer<std::byte>(slot_bytes_, "a prefetch slot's device buffer"),
                              CudaEvent("creating a prefetch slot's copy event"),
                              CudaEvent("creating a prefetch slot's release event"),
                              {}});
      thread_ = std::thread([this] { produce_loop(); });
    } catch (...) {
      slots_.clear();
      copy_stream_.reset();
      throw;
    }
  }

  ~DevicePrefetcherState() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    room_.notify_all();
    if (thread_.joinable()) thread_.join();

    tensor::set_current_gpu_noexcept(device_.ordinal);
    // Readers of the held batch may still be running: mark them like next() would, so that
    // the copy stream waits for them too; then one synchronisation covers the copies in
    // flight and every reader of every slot, and the memory can go.
    if (held_slot_) {
      for (const cudaStream_t reader : slots_[*held_slot_].readers) {
        const cudaEvent_t released = slots_[*held_slot_].released.get();
        if (cudaEventRecord(released, reader) != cudaSuccess ||
            cudaStreamWaitEvent(copy_stream_->get(), released, 0) != cudaSuccess)
          cudaGetLastError();  // a destructor cannot report; the reader's own checks will
      }
    }
    if (cudaStreamSynchronize(copy_stream_->get()) != cudaSuccess) cudaGetLastError();
    slots_.clear();
    copy_stream_.reset();
  }

  DevicePrefetcherState(const DevicePrefetcherState&) = delete;
  DevicePrefetcherState& operator=(const DevicePrefetcherState&) = delete;

  std::optional<GpuBatch> next() {
    tensor::set_current_gpu(device_.ordinal);
    // Release before taking: the producer refills this slot only once the queue has room,
    // which the pop below gives, so the marks are on the copy stream before its refill.
    if (held_slot_) {
      release(*held_slot_);
      held_slot_.reset();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      GpuBatch batch = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      room_.notify_one();
      held_slot_ = batch.slot_;
      held_index_ = batch.index_;
      // Non-blocking: a copy that already failed is reported now rather than at the
      // consumer's next synchronisation.
      const cudaError_t rc = cudaEventQuery(batch.copied_);
      if (rc != cudaSuccess && rc != cudaErrorNotReady)
        runtime::throw_cuda_error(rc, "cudaEventQuery", __FILE__, __LINE__, "copying a prefetched batch to the GPU");
      return batch;
    }
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }

  void wait_on(const GpuBatch& batch, cudaStream_t stream) {
    check_held(batch, "wait_on");
    tensor::set_current_gpu(device_.ordinal);
    // Caught here rather than as a failed record at the release, far from the cause.
    int stream_gpu = -1;
    SPMD_CHECK_CUDA(cudaStreamGetDevice(stream, &stream_gpu), "asking which GPU a consumer stream belongs to");
    if (stream_gpu != device_.ordinal)
      throw Error(where(device_) + ": wait_on with a stream of GPU " + std::to_string(stream_gpu) +
                  ", but the batch is on GPU " + std::to_string(device_.ordinal) +
                  "; read a batch from a stream of the prefetcher's GPU");
    SPMD_CHECK_CUDA(cudaStreamWaitEvent(stream, batch.copied_, 0),
                    "making a consumer stream wait for a prefetched batch");
    std::vector<cudaStream_t>& readers = slots_[batch.slot_].readers;
    if (std::find(readers.begin(), readers.end(), stream) == readers.end()) readers.push_back(stream);
  }

  void synchronize(const GpuBatch& batch) const {
    check_held(batch, "synchronize");
    SPMD_CHECK_CUDA(cudaEventSynchronize(batch.copied_), "waiting for a prefetched batch's copy to the GPU");
  }

  std::size_t depth() const { return depth_; }
  const runtime::DeviceInfo& device() const { return device_; }
  const std::vector<std::size_t>& array_capacities() const { return capacities_; }

 private:
  struct Slot {
    tensor::PinnedBuffer<std::byte> staging;
    tensor::DeviceBuffer<std::byte> memory;
    CudaEvent copied;    // recorded on the copy stream after the slot's last copy
    CudaEvent released;  // recorded on each reader stream when the consumer lets go
    std::vector<cudaStream_t> readers;  // streams given to wait_on while the consumer holds it
  };

  // Offsets of the arrays in a slot, each on a kArrayAlignment boundary.
  void plan_slot_layout() {
    std::size_t end = 0;
    offsets_.reserve(capacities_.size());
    for (std::size_t i = 0; i < capacities_.size(); ++i) {
      const std::size_t limit = std::numeric_limits<std::size_t>::max();
      if (end > limit - (kArrayAlignment - 1) ||
          capacities_[i] > limit - (end + kArrayAlignment - 1) / kArrayAlignment * kArrayAlignment)
        throw Error("prefetch_to_device: array_capacities add up to more bytes than a size_t holds (array " +
                    std::to_string(i) + " asks for " + std::to_string(capacities_[i]) + ")");
      const std::size_t offset = (end + kArrayAlignment - 1) / kArrayAlignment * kArrayAlignment;
      offsets_.push_back(offset);
      end = offset + capacities_[i];
    }
    slot_bytes_ = end;
  }

  // Consumer thread. The slot may be refilled once the work queued so far on its readers
  // has run: the copy stream waits for that point (the host does not block).
  void release(std::size_t slot_index) {
    Slot& slot = slots_[slot_index];
    for (const cudaStream_t reader : slot.readers) {
      SPMD_CHECK_CUDA(cudaEventRecord(slot.released.get(), reader),
                      "marking where a consumer stream stops reading a prefetched batch "
                      "(was the stream destroyed before next()?)");
      // Waits for the record just made; the event may be recorded again for the next reader.
      SPMD_CHECK_CUDA(cudaStreamWaitEvent(copy_stream_->get(), slot.released.get(), 0),
                      "ordering a prefetch slot's refill after its readers");
    }
    slot.readers.clear();
  }

  void check_held(const GpuBatch& batch, const char* call) const {
    if (!held_slot_ || held_index_ != batch.index_)
      throw Error(where(device_) + ": " + call + " on batch " + std::to_string(batch.index_) +
                  ", which a later next() call (or the end of the stream) already released; a GpuBatch is valid "
                  "only until the following next()");
  }

  void produce_loop() {
    try {
      tensor::set_current_gpu(device_.ordinal);
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          room_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
          if (stop_) return;
        }
        std::optional<HostBatch> host = producer_();  // outside the lock: the consumer keeps going
        if (!host) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            finished_ = true;
          }
          ready_.notify_one();
          return;
        }
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (stop_) return;  // the destructor is waiting: no point copying
        }
        GpuBatch batch = stage(std::move(*host));
        {
          std::lock_guard<std::mutex> lock(mutex_);
          queue_.push_back(std::move(batch));
        }
        ready_.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
        finished_ = true;
      }
      ready_.notify_one();
    }
  }

  void check_fits(const HostBatch& host, std::int64_t index) const {
    const std::string batch_name = "prefetch_to_device: batch " + std::to_string(index) + " (tag " +
                                   std::to_string(host.tag) + ")";
    if (host.arrays.size() != capacities_.size())
      throw Error(batch_name + " has " + std::to_string(host.arrays.size()) + " arrays; the prefetcher's slots hold " +
                  std::to_string(capacities_.size()) + " (one per entry of array_capacities)");
    for (std::size_t i = 0; i < capacities_.size(); ++i) {
      const HostBytes& array = host.arrays[i];
      if (array.bytes > capacities_[i])
        throw Error(batch_name + ", array " + std::to_string(i) + ": " + std::to_string(array.bytes) +
                    " bytes do not fit the slot's " + std::to_string(capacities_[i]) + " bytes (array_capacities[" +
                    std::to_string(i) + "]); give the largest batch's size as the capacity");
      if (array.bytes > 0 && array.data == nullptr)
        throw Error(batch_name + ", array " + std::to_string(i) + ": data is null but bytes is " +
                    std::to_string(array.bytes));
    }
  }

  // Producer thread: host arrays -> the slot's pinned staging -> its device memory, on the
  // copy stream. The slot is free: see the ring argument at mutex_.
  GpuBatch stage(HostBatch host) {
    const std::int64_t index = produced_;
    check_fits(host, index);
    const std::size_t slot_index = static_cast<std::size_t>(index) % slots_.size();
    Slot& slot = slots_[slot_index];
    // The pinned bytes may still be the source of the slot's previous copy.
    SPMD_CHECK_CUDA(cudaEventSynchronize(slot.copied.get()),
                    "waiting for a prefetch slot's previous copy before refilling its staging buffer");
    for (std::size_t i = 0; i < capacities_.size(); ++i)
      if (host.arrays[i].bytes > 0) std::memcpy(slot.staging.data() + offsets_[i], host.arrays[i].data, host.arrays[i].bytes);
    host.owner.reset();  // staged: the producer's memory is no longer needed

    GpuBatch batch;
    batch.state_ = this;
    batch.slot_ = slot_index;
    batch.index_ = index;
    batch.tag_ = host.tag;
    batch.copied_ = slot.copied.get();
    batch.arrays_.reserve(capacities_.size());
    for (std::size_t i = 0; i < capacities_.size(); ++i) {
      const std::size_t bytes = host.arrays[i].bytes;
      std::byte* destination = bytes == 0 ? nullptr : slot.memory.data() + offsets_[i];
      if (bytes > 0)
        SPMD_CHECK_CUDA(cudaMemcpyAsync(destination, slot.staging.data() + offsets_[i], bytes, cudaMemcpyHostToDevice,
                                        copy_stream_->get()),
                        "copying a prefetched batch to the GPU");
      batch.arrays_.push_back(DeviceBytes{destination, bytes});
    }
    SPMD_CHECK_CUDA(cudaEventRecord(slot.copied.get(), copy_stream_->get()), "marking the end of a prefetched batch's copy");
    ++produced_;
    return batch;
  }

  const runtime::DeviceInfo device_;
  DevicePrefetcher::Producer producer_;
  const std::size_t depth_;
  const std::vector<std::size_t> capacities_;
  std::vector<std::size_t> offsets_;  // of each array in a slot, bytes
  std::size_t slot_bytes_ = 0;
  std::optional<tensor::Stream> copy_stream_;  // the prefetch thread's copies, in batch order
  std::vector<Slot> slots_;                    // ring: batch k lives in slot k % (depth + 1)

  // Shared by both threads, under mutex_. Bound: queue_.size() <= depth_, so with the one
  // slot the consumer holds at most depth + 1 slots are in use, and the slot of the next
  // batch (produced_ % (depth + 1)) is always free when the producer gets room.
  std::mutex mutex_;
  std::condition_variable room_;   // the queue has room, or stop_
  std::condition_variable ready_;  // a batch is queued, or finished_
  std::deque<GpuBatch> queue_;
  bool finished_ = false;  // the producer returned nullopt, or production failed
  bool stop_ = false;      // the destructor wants the thread to end
  std::exception_ptr error_;

  // Consumer thread only.
  std::optional<std::size_t> held_slot_;  // the slot of the batch next() last returned
  std::int64_t held_index_ = -1;

  // Prefetch thread only.
  std::int64_t produced_ = 0;

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace detail

void GpuBatch::wait_on(cudaStream_t stream) const { state_->wait_on(*this, stream); }

void GpuBatch::synchronize() const { state_->synchronize(*this); }

DevicePrefetcher::DevicePrefetcher(const runtime::DeviceInfo& device, Producer producer, std::size_t depth,
                                   std::vector<std::size_t> array_capacities)
    : state_(std::make_unique<detail::DevicePrefetcherState>(device, std::move(producer), depth,
                                                             std::move(array_capacities))) {}

DevicePrefetcher::~DevicePrefetcher() = default;
DevicePrefetcher::DevicePrefetcher(DevicePrefetcher&&) noexcept = default;
DevicePrefetcher& DevicePrefetcher::operator=(DevicePrefetcher&&) noexcept = default;

namespace {
[[noreturn]] void throw_moved_from(const char* call) {
  throw Error(std::string("DevicePrefetcher::") + call + " on a prefetcher that was moved from");
}
}  // namespace

std::optional<GpuBatch> DevicePrefetcher::next() {
  if (!state_) throw_moved_from("next()");
  return state_->next();
}

std::size_t DevicePrefetcher::depth() const {
  if (!state_) throw_moved_from("depth()");
  return state_->depth();
}

const runtime::DeviceInfo& DevicePrefetcher::device() const {
  if (!state_) throw_moved_from("device()");
  return state_->device();
}

const std::vector<std::size_t>& DevicePrefetcher::array_capacities() const {
  if (!state_) throw_moved_from("array_capacities()");
  return state_->array_capacities();
}

}  // namespace spmd::sharding

