#pragma once
// What identifies an input file, for the two checks that need it. They differ on purpose:
//  - input_file_stamp: what every rank hashes with its options at start-up (size and
//    modification time), so that ranks that see different files behind the same path are
//    caught before any work;
//  - checkpoint_data_identity: what an ensemble checkpoint records about its training file
//    (path and size, no time), compared on --resume: a data set copied elsewhere, or
//    touched, still resumes; one of another size does not.
// No MPI: each is computed on the calling rank.
#include <string>

namespace spmd::data {

// " [size N mtime T]" (seconds), or " [missing]" when the file cannot be stat'ed.
std::string input_file_stamp(const std::string& path);

// "PATH (N bytes)", or "PATH (? bytes)" when the size cannot be read. Stored in checkpoints:
// the text must not change.
std::string checkpoint_data_identity(const std::string& path);

}  // namespace spmd::data
