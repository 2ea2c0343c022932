// ProgressLine, the one progress display of the CLI (logreg iterations, ensemble steps,
// eval rows): '#' lines at the period and at the end when stderr is not a terminal, a bar
// redrawn in place when it is, nothing on ranks other than 0; due() paces it by time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "spmd/workloads/report.hpp"

using spmd::workloads::ProgressLine;

namespace {
// What fn printed: {stdout, stderr}.
template <class Fn>
std::pair<std::string, std::string> printed(Fn&& fn) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  fn();
  std::string err = testing::internal::GetCapturedStderr();
  return {testing::internal::GetCapturedStdout(), std::move(err)};
}
}  // namespace

TEST(ProgressLine, LinesAtThePeriodAndAtTheEnd) {
  ProgressLine p(true, false);
  EXPECT_FALSE(p.live());
  const auto lines = printed([&] {
    for (int step = 1; step <= 7; ++step) p.update("epoch 2 step", step, 7, "12 images/s per member", 3);
    p.close();
  });
  EXPECT_EQ(lines.first,
            "# epoch 2 step 3/7  12 images/s per member\n"
            "# epoch 2 step 6/7  12 images/s per member\n"
            "# epoch 2 step 7/7  12 images/s per member\n");
  EXPECT_EQ(lines.second, "");
  // every 0: the caller prints its own lines.
  EXPECT_EQ(printed([&] { p.update("iter", 5, 10, "value 1", 0); }).first, "");
}

TEST(ProgressLine, LiveBarIsRedrawnAndEndsItsLine) {
  ProgressLine p(true, true);
  EXPECT_TRUE(p.live());
  const auto [out, err] = printed([&] {
    p.update("iter", 1, 4, "value 2.5", 1);
    p.update("iter", 2, 4, "value 1.5", 1);
    p.close();  // stopped early (converged): the line still ends
    p.close();  // once
  });
  EXPECT_EQ(out, "");  // no '#' lines while live
  EXPECT_NE(err.find("\riter [#######" + std::string(23, ' ') + "] 1/4  value 2.5"), std::string::npos) << err;
  EXPECT_NE(err.find("\riter [###############" + std::string(15, ' ') + "] 2/4  value 1.5"), std::string::npos) << err;
  EXPECT_NE(err.find("ETA"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // The last step ends the line itself.
  const std::string end = printed([&] {
    p.update("iter", 4, 4, "done", 1);
    p.close();
  }).second;
  EXPECT_EQ(std::count(end.begin(), end.end(), '\n'), 1) << end;
}

TEST(ProgressLine, DisabledShowsNothing) {
  ProgressLine p(false, true);
  EXPECT_FALSE(p.live());
  const auto both = printed([&] {
    p.update("iter", 1, 1, "x", 1);
    p.close();
  });
  EXPECT_EQ(both.first, "");
  EXPECT_EQ(both.second, "");
}

TEST(ProgressLine, DueOncePerPeriodNotBeforeTheFirst) {
  ProgressLine p(true, false);
  const double period = 0.05;
  EXPECT_FALSE(p.due(period));  // the first call starts the clock: a short loop shows nothing
  EXPECT_FALSE(p.due(period));
  std::this_thread::sleep_for(std::chrono::duration<double>(period * 1.5));
  EXPECT_TRUE(p.due(period));
  EXPECT_FALSE(p.due(period));  // the next one, a period later
  std::this_thread::sleep_for(std::chrono::duration<double>(period * 1.5));
  EXPECT_TRUE(p.due(period));
}

TEST(ProgressLine, DueRedrawsALiveBarAtItsOwnPace) {
  ProgressLine live(true, true);
  EXPECT_FALSE(live.due(3600));
  std::this_thread::sleep_for(std::chrono::duration<double>(ProgressLine::kLiveRedrawSeconds * 1.2));
  EXPECT_TRUE(live.due(3600));  // a terminal is redrawn whatever the period of log lines
  ProgressLine disabled(false, true);
  std::this_thread::sleep_for(std::chrono::duration<double>(ProgressLine::kLiveRedrawSeconds * 1.2));
  EXPECT_FALSE(disabled.due(0.0));
}
