#pragma once
// prefetch_to_device(iterator, size): a thread fills a bounded queue ahead of the consumer,
// so that preparing batch k+1 (reading, padding, copying) overlaps the step on batch k.
//
// Prefetcher<T> takes a producer `std::optional<T>()` (nullopt = end of stream) and a depth:
//  - order is preserved;
//  - bounded: at most `depth` items are produced and not yet taken by next(); the producer
//    is not called again until the consumer makes room (flax: 2 is right for GPUs);
//  - an exception thrown by the producer ends production; next() first returns the items
//    produced before it, then rethrows it (on this and every later call);
//  - the destructor stops the thread even when the queue was not drained. A producer call
//    already in progress is allowed to finish (it cannot be interrupted), so a producer
//    that blocks forever blocks the destructor too.
// The producer runs on the prefetch thread: it must not call MPI (collectives stay on the
// main thread, in the same order on every rank). A producer that reads HDF5 does so through
// its own serial handle, while no other thread calls HDF5 (data/serial_row_reader.hpp).
//
// On a GPU the blocks this thread reads stay host bytes as stored (uint8 images too); each
// GPU model then copies its tiles through page-locked staging on a copy stream of its own
// and decodes them on the GPU, the copy of one tile overlapping the compute of the one
// before (backends/cuda/byte_stager.hpp): the thread hides the reads, the copy stream the
// transfers.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "spmd/runtime/error.hpp"

namespace spmd::sharding {

template <class T>
class Prefetcher {
 public:
  using Producer = std::function<std::optional<T>()>;

  // Starts the thread. Throws spmd::Error for depth < 1 or an empty producer.
  Prefetcher(Producer producer, std::size_t depth) : producer_(std::move(producer)), depth_(depth) {
    if (depth_ < 1) throw Error("prefetch_to_device: size (prefetch depth) must be >= 1, got " + std::to_string(depth_));
    if (!producer_) throw Error("prefetch_to_device: the producer function is empty");
    thread_ = std::thread([this] { produce_loop(); });
  }

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    room_.notify_all();
    thread_.join();
  }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next item in producer order; nullopt once the producer said so. Blocks while the
  // queue is empty and the producer is still running.
  std::optional<T> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      std::optional<T> item(std::move(queue_.front()));
      queue_.pop_front();
      lock.unlock();
      room_.notify_one();
      return item;
    }
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }

  std::size_t depth() const { return depth_; }

 private:
  void produce_loop() {
    try {
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          room_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
          if (stop_) return;
        }
        std::optional<T> item = producer_();  // outside the lock: the consumer keeps going
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (item)
            queue_.push_back(std::move(*item));
          else
            finished_ = true;
        }
        ready_.notify_one();
        if (!item) return;
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

  Producer producer_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable room_;   // the queue has room, or stop_
  std::condition_variable ready_;  // an item is queued, or finished_
  std::deque<T> queue_;
  bool finished_ = false;  // the producer returned nullopt or threw
  bool stop_ = false;      // the destructor wants the thread to end
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

// The flax spelling. Prefetcher is not movable (its thread points at it); C++17's guaranteed
// copy elision still lets this return it: `auto p = prefetch_to_device<Batch>(fn, 2);`.
template <class T>
Prefetcher<T> prefetch_to_device(typename Prefetcher<T>::Producer producer, std::size_t size) {
  return Prefetcher<T>(std::move(producer), size);
}

}  // namespace spmd::sharding
