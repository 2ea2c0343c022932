#pragma once
// Reading a small text file that a user names (a config, a list of class weights) as an
// untrusted input: only a regular file of at most max_bytes is read (a FIFO would block, a
// device or a directory is not a file of values), opened without blocking.
#include <cstddef>
#include <string>

namespace spmd::runtime {

// what: how messages name it ("--config 'run.ini'"); content: what it should hold ("a config
// is read from a file of key = value lines"). Throws spmd::Error naming it.
std::string read_small_text_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                                 const std::string& content);

}  // namespace spmd::runtime
