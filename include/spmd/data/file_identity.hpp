#pragma once
// What identifies an input file, for the two checks that need it. They differ on purpose:
//  - input_file_stamp: what every rank hashes with its options at start-up (size and
//    modification time), so that ranks that see different files behind the same path are
//    caught before any work;
//  - checkpoint_data_identity: what an ensemble checkpoint records about its training file
//    (path and size, no time), compared on --resume: a data set copied elsewhere, or
//    touched, still resumes; one of another size does not.
//  - FileIdentity: device, inode, size and modification time, taken at start-up and
//    compared after loading and at the end of a run: a file truncated or rewritten in place
//    while ranks read it would otherwise give a silently wrong answer (reads past the new
//    end come back as zeros).
// No MPI: each is computed on the calling rank.
#include <cstdint>
#include <string>

namespace spmd::data {

// "PATH (N bytes)", or "PATH (? bytes)" when the size cannot be read. Stored in checkpoints:
// the text must not change.
std::string checkpoint_data_identity(const std::string& path);

struct FileIdentity {
  std::uint64_t device = 0, inode = 0;
  std::int64_t size = -1;  // -1: the file could not be stat'ed
  std::int64_t mtime_ns = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

FileIdentity file_identity(const std::string& path);

// " [size N mtime T]" (seconds), or " [missing]" when the file could not be stat'ed.
std::string input_file_stamp(const FileIdentity& id);

// What differs, for a message: "size 1000 -> 500 bytes, modified 04:50:01.2 -> 04:50:03.7",
// "replaced (another file under the same name)", "removed".
std::string describe_change(const FileIdentity& before, const FileIdentity& after);

}  // namespace spmd::data
