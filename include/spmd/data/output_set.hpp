#pragma once
// The outputs of one run appear together or not at all. `eval --predictions ok/p.h5 --json
// full/j.json` used to publish the predictions and then fail on the JSON's full disk: half a
// result, under names that look complete. Here every output is first written in full to its
// temporary file beside its final name (`.NAME.tmp.PID`, as every atomic writer does) and
// handed to the set; publish() renames them all only once the last one is written. A run
// that fails before (a full disk, a bad write, an exception unwinding) leaves none of them,
// and the files those names held before stay byte for byte as they were.
//
// The renames themselves are atomic one by one, not as a group; a rename within one folder
// fails only if the folder itself goes away, and the message then says what was published.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spmd/runtime/stop_request.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class OutputSet {
 public:
  // Collective use: every rank holds one and calls write_text() and publish() together.
  explicit OutputSet(const runtime::Context& ctx);
  // Removes the temporaries of outputs not published (rank 0, which owns them).
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // On rank 0 (elsewhere a no-op): takes a finished temporary file (flushed and closed) to
  // be renamed onto final_path by publish().
  void stage(std::string temp_path, std::string final_path);

  // Collective: rank 0 writes text to the temporary of path (fsynced) and stages it; a
  // failure (naming the path and errno's reason) is thrown on every rank.
  void write_text(const std::string& path, const std::string& text);

  // Collective: rank 0 renames every staged file onto its final name, in the order staged,
  // and fsyncs their folders; agreed. Nothing may be staged afterwards.
  void publish();

 private:
  const runtime::Context& ctx_;
  std::vector<std::pair<std::string, std::string>> staged_;  // temporary, final
  std::vector<runtime::LiveFile> live_;                     // the staged temporaries
  bool published_ = false;
};

// Why a rename onto final_path would fail although a temporary beside it can be written, or ""
// (as far as can be told; the rename still says why if it fails): an existing file that is
// immutable or append-only (chattr +i, +a), or a directory. publish() asks it of every output
// before the first rename, so that such a file leaves all of them unpublished instead of
// some; the CLI asks it at start-up, before any work.
std::string replace_refusal(const std::string& final_path);

// Writes text to path through a temporary in the same folder, fsync and a rename, so a
// reader never sees half a file (no MPI). Throws spmd::Error naming the path.
void write_text_atomic(const std::string& path, const std::string& text);

// The temporary half of write_text_atomic: the text written and fsynced to path's
// temporary, whose name is returned; on failure the temporary is removed and spmd::Error
// names the path and the reason.
std::string write_text_temporary(const std::string& path, const std::string& text);

// Room for an output before it is written: a full disk found at the end of a run loses the
// run's work, and MPI-IO reports it as a bare "can't write data". "" when the folder of
// final_path has at least `bytes` free for this user (statvfs; also "" when that cannot be
// told), else "No space left on device: 'FOLDER' has N bytes free, WHAT needs M bytes".
std::string space_shortage(const std::string& final_path, std::uint64_t bytes, const std::string& what);

}  // namespace spmd::data
