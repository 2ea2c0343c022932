// runtime/stop_request.hpp: signals inside a polling scope are requests; outside, they end
// the process by the signal itself after unlinking the registered live files. The ending
// cases run in a forked child (the test process must survive them).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "spmd/runtime/stop_request.hpp"

namespace {

namespace fs = std::filesystem;
using namespace spmd;

std::string scratch_file(const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("spmd-stop-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path) << "partial";
  return path.string();
}

// The wait status of a child that ran fn and then exited 0.
int in_child(const std::function<void()>& fn) {
  { const runtime::StopPolling install; }  // the handlers, inherited by the child
  const pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(StopRequest, InsidePollingASignalIsARequestAndTheProcessGoesOn) {
  runtime::reset_stop_request_for_tests();
  {
    const runtime::StopPolling polling;
    EXPECT_EQ(runtime::local_stop_signal(), 0);
    std::raise(SIGUSR1);
    EXPECT_EQ(runtime::local_stop_signal(), SIGUSR1);
    std::raise(SIGTERM);  // a later one keeps the first
    EXPECT_EQ(runtime::local_stop_signal(), SIGUSR1);
  }
  runtime::reset_stop_request_for_tests();
  EXPECT_EQ(runtime::signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(runtime::signal_name(SIGUSR1), "SIGUSR1");
}

TEST(StopRequest, OutsidePollingASignalRemovesLiveFilesAndEndsByThatSignal) {
  const std::string live = scratch_file("live"), released = scratch_file("released");
  const int status = in_child([&] {
    runtime::LiveFile a(live);
    runtime::LiveFile b(released);
    b.release();  // renamed onto its final name, say: no longer the handler's
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);  // the exit status stays 128 + 15 for the launcher
  EXPECT_FALSE(fs::exists(live));
  EXPECT_TRUE(fs::exists(released));
  fs::remove(released);
}

TEST(StopRequest, ASecondSigintWhileAStopIsPendingEndsTheProcess) {
  const std::string live = scratch_file("sigint");
  const int status = in_child([&] {
    runtime::reset_stop_request_for_tests();
    const runtime::StopPolling polling;
    runtime::LiveFile a(live);
    std::raise(SIGINT);  // a request
    if (runtime::local_stop_signal() != SIGINT) ::_exit(3);
    std::raise(SIGINT);  // the impatient second one
    ::_exit(4);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_FALSE(fs::exists(live));
}

}  // namespace
