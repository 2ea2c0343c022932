#pragma once
// Rank-0 reporting: the start-up table, fixed-width result tables with units, and the
// machine-readable JSON summary (written atomically: a temp file renamed into place).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

// Collective (gathers the rank table); prints on rank 0 only:
//   # spmd <command>  ranks 2  devices/rank 1  backend cpu (...)
//   #  rank  host  local  devices
std::string startup_table(const runtime::Context& ctx, const std::string& command);
// The same information for --json.
nlohmann::json startup_json(const runtime::Context& ctx);

// A fixed-width table: columns with a header and a unit ("examples/s"); rows of cells
// already formatted. Rendered with '#' header lines, as nccl-tests prints.
class Table {
 public:
  struct Column {
    std::string name;
    std::string unit;  // may be empty
    int width;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  std::string header() const;
  std::string row(const std::vector<std::string>& cells) const;

 private:
  std::vector<Column> columns_;
};

// printf into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// JSON pretty-printed, atomically (data::write_text_atomic). Rank 0 only by convention
// (callers check); a run with several outputs writes it through its data::OutputSet.
void write_json(const std::string& path, const nlohmann::json& j);
// The text write_json writes (pretty-printed, a final newline).
std::string json_text(const nlohmann::json& j);

// Progress of a long loop, shown by rank 0 (give enabled = false elsewhere, or for --quiet):
//  - live (stderr is a terminal): "LABEL [#####     ] DONE/TOTAL  DETAIL  ETA S s" redrawn in
//    place on stderr; the line ends when DONE reaches TOTAL, or at close();
//  - otherwise a line "# LABEL DONE/TOTAL  DETAIL" on stdout when DONE is a multiple of
//    `every` or equals TOTAL (every <= 0: no lines; the caller prints its own, e.g. a table).
// The ETA comes from the time since the first update of the current count (a count that
// goes back, a new epoch, starts it again).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ProgressLine(bool enabled, bool live);  // live given (tests)
  bool live() const { return enabled_ && live_; }
  void update(const std::string& label, std::int64_t done, std::int64_t total, const std::string& detail,
              std::int64_t every = 0);
  void close();  // ends a live line left unfinished (a loop that stopped early)

  // Pacing by time rather than by count, for loops of many short steps (eval): whether
  // something is due now. Not live: `period` seconds after the last line (the first, a
  // period after the first call, so a loop that ends sooner prints nothing). Live: at most
  // every kLiveRedrawSeconds. A caller that gets true shows it with update(..., every = 1).
  bool due(double period);
  static constexpr double kLiveRedrawSeconds = 0.25;

 private:
  bool enabled_, live_;
  bool open_ = false;  // a live line is drawn and not ended
  double last_due_ = -1;  // when due() last said true (or was first asked)
  std::int64_t last_done_ = -1, first_done_ = 0;
  double first_seconds_ = 0;
};

}  // namespace spmd::workloads
