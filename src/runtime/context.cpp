#include "spmd/runtime/context.hpp"
#include "spmd/runtime/memory_limits.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/cpu_features.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "spmd/runtime/watchdog.hpp"

extern "C" void openblas_set_num_threads(int);

namespace spmd::runtime {

Context::Context(MPI_Comm comm, const ContextOptions& options)
    : comm_(comm), stall_rank_(options.stall_rank), stall_phase_(options.stall_phase), stall_seconds_(options.stall_seconds) {
  SPMD_CHECK_MPI(MPI_Comm_rank(comm, &rank_), "");
  SPMD_CHECK_MPI(MPI_Comm_size(comm, &size_), "");
  MPI_Comm node = MPI_COMM_NULL;
  SPMD_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
                 "splitting the communicator by node");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_ = std::string(name, static_cast<size_t>(len));

  // Parallelism comes from ranks and devices; a BLAS that spawns its own threads on top
  // would oversubscribe the cores.
  openblas_set_num_threads(1);

  std::string error;
  std::vector<DeviceInfo> devices;
  if (options.devices_per_rank < 1) error = "--devices must be >= 1 (got " + std::to_string(options.devices_per_rank) + ")";
  if (error.empty()) {
    PlatformChoice choice;
    if (options.select != nullptr)
      choice = options.select(options.backend);
    else if (options.backend == "cpu")
      choice = {&host_platform(), "CPU", ""};
    else
      choice.error = "--backend " + options.backend + ": this program knows no backend but cpu";
    if (!choice.error.empty()) {
      error = rank_tag() + " on " + host_ + ": " + choice.error;
    } else {
      platform_ = choice.platform;
      backend_note_ = choice.note;
      std::vector<int> ordinals;
      if (platform_->name() != "cpu") {
        std::string why_none;
        const int visible = platform_->device_count(&why_none);
        if (visible <= 0)
          error = rank_tag() + " on " + host_ + ": --backend " + std::string(platform_->name()) +
                  " but no " + std::string(platform_->device_kind()) +
                  " is usable here (" + why_none + "). Use --backend cpu or auto, or run on a GPU node (Slurm: --gpus-per-task).";
        else
          ordinals = assign_gpus(local_rank_, options.devices_per_rank, visible);
      } else {
        for (int k = 0; k < options.devices_per_rank; ++k) ordinals.push_back(k);
      }
      for (int k = 0; error.empty() && k < options.devices_per_rank; ++k) {
        DeviceInfo d;
        d.local_index = k;
        d.global_index = rank_ * options.devices_per_rank + k;
        d.platform = platform_;
        d.ordinal = ordinals[static_cast<size_t>(k)];
        d.name = platform_->device_name(d.ordinal);
        devices.push_back(d);
      }
    }
  }
  agree_or_throw(comm, error);
  // Every rank must hold the same number of devices and the same backend, or global device
  // indices and step counts would disagree.
  const long long mine[2] = {static_cast<long long>(devices.size()),
                             static_cast<long long>(stable_hash(std::string(platform_->name())) >> 2)};
  long long lo[2], hi[2];
  SPMD_CHECK_MPI(MPI_Allreduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, comm), "comparing device counts");
  SPMD_CHECK_MPI(MPI_Allreduce(mine, hi, 2, MPI_LONG_LONG, MPI_MAX, comm), "comparing device counts");
  if (lo[0] != hi[0] || lo[1] != hi[1])
    agree_or_throw(comm, rank_tag() + ": ranks disagree on devices per rank (" + std::to_string(lo[0]) + ".." +
                             std::to_string(hi[0]) + ") or backend; every rank must have the same devices");
  pool_ = std::make_unique<DevicePool>(std::move(devices));
  set_memory_sharers({local_size_, pool_->size()});
  if (rank_ == options.slow_rank) pool_->set_simulated_delay(options.slow_seconds);
  watchdog_ = std::make_unique<Watchdog>(comm, options.hang_timeout_s);
}

Context::~Context() = default;

void Context::set_phase(const std::string& phase) const {
  if (watchdog_) watchdog_->set_phase(phase);
  set_io_phase(phase);
  if (rank_ == stall_rank_) stall_if_asked(phase);
}

void Context::set_step_phase(const char* name, std::int64_t step) const {
  if (watchdog_) watchdog_->set_step_phase(name, step);
  if (rank_ == stall_rank_) stall_if_asked(std::string(name) + " " + std::to_string(step));
}

void Context::stall_if_asked(const std::string& phase) const {
  if (phase != stall_phase_) return;
  if (watchdog_) watchdog_->set_phase(phase + " (simulated stall)");
  std::this_thread::sleep_for(std::chrono::duration<double>(stall_seconds_));
}

std::vector<Context::RankRow> Context::gather_rank_table() const {
  // Fixed-size records keep this to one MPI_Gather.
  struct Wire {
    int rank, local_rank;
    char host[64];
    char devices[192];
  } w{};
  w.rank = rank_;
  w.local_rank = local_rank_;
  std::snprintf(w.host, sizeof w.host, "%s", host_.c_str());
  std::string devs;
  for (const auto& d : devices()) devs += (devs.empty() ? "" : ", ") + d.name;
  if (platform_->name() == "cpu") devs = std::to_string(devices().size()) + " x cpu (" + cpu_model_name() + "; kernels " + to_string(cpu_level()) +
           (cpu_level() == host_cpu_level() ? "" : ", capped by SPMD_MAX_CPU_ISA") + ")";
  std::snprintf(w.devices, sizeof w.devices, "%s", devs.c_str());
  std::vector<Wire> all(rank_ == 0 ? static_cast<size_t>(size_) : 0);
  TimeScope communication(TimeCategory::Communication);
  SPMD_CHECK_MPI(MPI_Gather(&w, sizeof w, MPI_BYTE, all.data(), sizeof w, MPI_BYTE, 0, comm_), "gathering the rank table");
  std::vector<RankRow> rows;
  for (const auto& a : all) rows.push_back({a.rank, a.host, a.local_rank, a.devices});
  return rows;
}

}  // namespace spmd::runtime
