#pragma once
// The SPMD context of one rank: the communicator, world and node-local rank, host name,
// and this rank's devices. Construction is collective over the communicator.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "spmd/runtime/devices.hpp"

namespace spmd::runtime {

class Watchdog;

struct ContextOptions {
  // "cpu", "auto" or a backend's name (--backend). Anything but "cpu" needs `select`.
  std::string backend = "cpu";
  int devices_per_rank = 1;       // CPU worker threads or GPUs per rank, >= 1
  double hang_timeout_s = 300.0;  // <= 0 disables the watchdog
  // Testing aid for the fault tests: rank stall_rank sleeps stall_seconds when it enters
  // the phase named stall_phase (see set_phase), as a stuck rank would.
  int stall_rank = -1;
  std::string stall_phase;
  double stall_seconds = 3600.0;
  // Testing aid for the time breakdown: rank slow_rank's every device dispatch takes
  // slow_seconds longer (DevicePool::set_simulated_delay), as on a slower device.
  int slow_rank = -1;
  double slow_seconds = 0;
  // Resolves `backend` to a platform, loading its module if need be: the backends layer's
  // backends::select_platform (the runtime knows no backend but the host's CPU threads).
  PlatformSelector select = nullptr;
};

class Context {
 public:
  // Collective. Throws spmd::CollectiveError on every rank if any rank cannot get its
  // devices (e.g. --backend cuda without a GPU, or its module missing).
  Context(MPI_Comm comm, const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  bool is_root() const { return rank_ == 0; }

  const DevicePlatform& platform() const { return *platform_; }
  std::string_view backend() const { return platform_->name(); }
  // Why this backend was picked ("--backend auto: no GPU visible (...); using CPU").
  const std::string& backend_note() const { return backend_note_; }
  int devices_per_rank() const { return pool_->size(); }
  int total_devices() const { return pool_->size() * size_; }
  int global_device(int local_index) const { return rank_ * pool_->size() + local_index; }
  const std::vector<DeviceInfo>& devices() const { return pool_->devices(); }
  DevicePool& pool() const { return *pool_; }
  Watchdog* watchdog() const { return watchdog_.get(); }

  // Name of what the program is doing now ("eval step 12"), shown by the watchdog.
  void set_phase(const std::string& phase) const;
  // set_phase(name + " " + step) for per-step phases, without building the string (a step
  // can take microseconds). name must be a string literal.
  void set_step_phase(const char* name, std::int64_t step) const;

  // One line per rank, gathered on rank 0 (empty elsewhere): rank, host, local rank, devices.
  struct RankRow {
    int rank;
    std::string host;
    int local_rank;
    std::string devices;
  };
  std::vector<RankRow> gather_rank_table() const;

 private:
  void stall_if_asked(const std::string& phase) const;

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  const DevicePlatform* platform_ = &host_platform();
  std::string backend_note_;
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<Watchdog> watchdog_;
  int stall_rank_ = -1;
  std::string stall_phase_;
  double stall_seconds_ = 0;
};

}  // namespace spmd::runtime
