#pragma once
// Errors that reach the user. Every message names what was wrong (file, dataset, option,
// rank, call) and, where one exists, what to do about it.
#include <stdexcept>
#include <string>

namespace spmd {

// A failure the user can act on (bad option, bad input file, failed library call).
// Thrown on the rank(s) that detected it; the CLI turns it into a message and a non-zero
// exit on every rank (see runtime/agree.hpp and cli/main.cpp).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The same failure already agreed on by every rank of the communicator (thrown by
// runtime::agree_or_throw on all ranks at once), so the CLI may exit cleanly instead of
// aborting the job.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

}  // namespace spmd
