#pragma once
// Checks every command's options get without asking for them: numbers that Boost accepts but
// no option means (a wrapped negative, inf, nan), the --hang-timeout floor, and the --config
// file's text (byte-order mark, comments). Each refusal names the option.
#include <boost/program_options.hpp>

#include <string>

namespace spmd::cli {

namespace po = boost::program_options;

// Refuses a value of an unsigned option (std::uint64_t, unsigned) that starts with '-':
// Boost's lexical_cast reads "-1" as 2^64 - 1. Call on what a parser returned, before store.
void refuse_negative_unsigned(const po::parsed_options& parsed, const po::options_description& options);

// Every float and double option must be finite: none of them means anything by inf or nan
// (a limit that can be switched off takes 0, as --hang-timeout does).
void require_finite_reals(const po::variables_map& vm);

// --hang-timeout is 0 (off) or at least kMinHangTimeout seconds.
inline constexpr double kMinHangTimeout = 1.0;
void check_hang_timeout(const po::variables_map& vm);

// A --config file's "key = value" lines as Boost's parsers return them (then store them).
// Boost's own INI parser cuts every line at its first '#' and reads a UTF-8 byte-order mark
// (Windows editors write one) as part of the first key. Here a byte-order mark is skipped,
// and a comment is a '#' that starts a line or follows a space or tab ("# note",
// "x = 1  # note"), so a '#' inside a value ("json = run#7.json") stays in it. "[section]"
// lines prefix the keys ("section.key") as Boost's do. Throws spmd::Error naming `path`,
// the line and, for an unknown key, the option.
// A NUL byte is refused (a C string would cut the value there: a path read shorter than
// written), and so is a "config" key (a file naming another would be silently ignored).
po::parsed_options parse_config(const std::string& text, const std::string& path, const po::options_description& options);

// The --config file's bytes. It is untrusted and may be anything with a name: only a regular
// file of at most kMaxConfigBytes is read (a FIFO would block, /dev/zero never end, a
// directory read as empty); opened without blocking, then checked on the open descriptor.
inline constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;
std::string read_config_file(const std::string& path);

// `text` cut to its first and last `limit` / 2 bytes, saying how many were left out between: a
// user's value echoed in an error (an 8 MB value would flood the terminal and every rank's log).
std::string shortened(const std::string& text, std::size_t limit = 200);

}  // namespace spmd::cli
