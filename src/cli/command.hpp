#pragma once
// Shared command-line machinery: Boost.Program_options with --config INI files (the command
// line wins), --help, validation helpers whose messages name the option and the constraint,
// and the canonical text of the validated options that every rank hashes and compares.
#include <boost/program_options.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spmd/data/file_identity.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::cli {

namespace po = boost::program_options;

struct CommandLine {
  po::variables_map vm;
  bool help = false;
  std::string help_text;
  // "key=value" lines, sorted, for the cross-rank identity check; file options also carry
  // the file's size and modification time, so ranks that see different inputs are caught.
  std::string canonical;
  // The input files (option, path) as they were when the options were read.
  struct Input {
    std::string option, path;
    data::FileIdentity identity;
  };
  std::vector<Input> inputs;
  // Whether this rank checks files for its node (node-local rank 0), found once.
  bool checks_files = true;
  std::string command;
};

// Collective: the inputs are still the files the run started with (checked once per
// node); else every rank throws a CollectiveError naming the option, the file, what
// changed and `when` ("after loading", "at the end"). Call after loading and before
// writing results.
void require_inputs_unchanged(const CommandLine& cl, const std::string& when);

// A float or double option whose --help shows its default as written ("0.1"), not as Boost
// prints the stored binary value ("0.100000001"): the shortest text that reads back as the
// same value (std::to_chars), so the text can never drift from the value.
po::typed_value<float>* real_value(float default_value);
po::typed_value<double>* real_value(double default_value);

// Options every workload command takes: --config, --json, --devices, --backend,
// --hang-timeout, --help.
po::options_description common_options(bool with_devices = true);

// Parses args (without the program and command names). Throws spmd::Error on unknown
// options, bad values or an unreadable --config, naming the option. Touches no input file:
// file_options (option names whose values are input files) become cl.inputs, whose
// identities parse_validated takes once per node before it makes cl.canonical.
CommandLine parse_command(const std::string& command, const std::string& usage, const po::options_description& options,
                          const std::vector<std::string>& args, const std::vector<std::string>& file_options = {});

// cl.canonical from the options and the inputs' identities as they are in cl.
void make_canonical(CommandLine& cl);

runtime::ContextOptions context_options(const po::variables_map& vm);

// Validation helpers: throw spmd::Error("--NAME must ... (got X)").
void require_positive(const po::variables_map& vm, const std::string& name);
void require_non_negative(const po::variables_map& vm, const std::string& name);
void require_at_most(const po::variables_map& vm, const std::string& name, double limit, const std::string& why);
void require_present(const po::variables_map& vm, const std::string& name, const std::string& why = "");
void require_readable_file(const po::variables_map& vm, const std::string& name);
void require_writable_destination(const po::variables_map& vm, const std::string& name);

// --json value or empty.
std::string json_path(const po::variables_map& vm);

// The files a command reads and writes, by option name. Inputs are stat'ed once per node
// and hashed with the options; outputs are checked against the inputs and each other
// (data::require_safe_outputs: no output may be an input, another output or a device).
// --config is an input and --json an output of every command. An option may be both (an
// ensemble's --checkpoint is read on --resume and written every epoch).
struct FileOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> mpi_io;  // of the above, those every rank opens through MPI-IO
};

// The whole front half of every command, on every rank: parse, validate (validate may
// throw spmd::Error), check the outputs, agree across ranks on failure (so every rank
// exits, rank 0 prints), then check that all ranks got the same options and inputs.
// Relative outputs are resolved against rank 0's working directory when the ranks run in
// different ones (MPMD launches, some schedulers), so that all ranks write one file.
// With --help, rank 0 prints help_text and it returns with help=true (the caller exits 0).
CommandLine parse_validated(const std::string& command, const std::string& usage, const po::options_description& options,
                            const std::vector<std::string>& args, const FileOptions& files,
                            const std::function<void(const po::variables_map&)>& validate);

// Serial work (reading or writing one file): fn runs on rank 0 and every rank returns or
// throws together.
void on_root(const std::function<void()>& fn);

// spmd COMMAND SUBCOMMAND ...: runs the subcommand's function with the arguments after it;
// no subcommand prints usage (exit 2), --help prints it (exit 0), an unknown one is an error
// naming it.
using Subcommand = int (*)(const std::vector<std::string>& args);
int run_subcommand(const std::string& command, const std::vector<std::string>& args, const char* usage,
                   const std::map<std::string, Subcommand>& subcommands);

}  // namespace spmd::cli
