#include "command.hpp"

#include "spmd/data/output_set.hpp"
#include "option_checks.hpp"
#include "commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "spmd/backends/backend.hpp"
#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_metadata_probe.hpp"
#include "spmd/data/linked_files.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/data/output_targets.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/mpi.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::cli {

namespace {
template <class Real>
po::typed_value<Real>* real_value_of(Real value) {
  char text[64];
  const auto written = std::to_chars(text, text + sizeof text, value);
  return po::value<Real>()->default_value(value, std::string(text, written.ptr));
}
}  // namespace

po::typed_value<float>* real_value(float default_value) { return real_value_of(default_value); }
po::typed_value<double>* real_value(double default_value) { return real_value_of(default_value); }

po::options_description common_options(bool with_devices) {
  po::options_description d("Common options");
  d.add_options()("help,h", "show this help and exit")(
      "config", po::value<std::string>(),
      "read options from this INI file (key = value, same names as the long options); the command line wins")(
      "json", po::value<std::string>(), "write a machine-readable summary to this file (rank 0, atomic)")(
      "allow-outside-files", po::bool_switch(),
      "let an HDF5 input lead outside its own folder: external links, external raw files and virtual-dataset sources "
      "elsewhere are refused without it (a file from elsewhere must not make spmd read other files)")(
      "max-loop-iterations", po::value<std::int64_t>()->default_value(models::kDefaultMaxLoopIterations),
      "the most iterations an ONNX Loop may run (>= 1): a model from elsewhere with a trip count of 2^62 would "
      "run until killed; past it the node is refused")(
      "max-range-length", po::value<std::int64_t>()->default_value(ops::kDefaultMaxRangeLength),
      "the most values an ONNX Range may make (>= 1): its bounds come from the model or its input; past it the node "
      "is refused")(
      "hang-timeout", real_value(300.0),
      "seconds a rank may wait in one collective before the job is stopped with a report naming the "
      "ranks that did not arrive (0 disables; else at least 1)")(
      "simulate-stall", po::value<std::string>(),
      "testing aid: RANK:PHASE makes that rank sleep when it enters PHASE (e.g. '1:eval step 3'), as a stuck rank would; "
      "RANK:io:CALL[:TEXT] makes its first file-system CALL (stat, open, H5Fopen, ...) on a path containing TEXT hang "
      "as on a hung mount")(
      "simulate-slow", po::value<std::string>(),
      "testing aid: RANK:SECONDS makes that rank's every device dispatch take SECONDS longer (e.g. '1:0.05'), as a "
      "slower device would; see the time breakdown");
  if (with_devices)
    d.add_options()("devices", po::value<int>()->default_value(1),
                    "devices per rank: CPU worker threads, or GPUs with --backend cuda")(
        "backend", po::value<std::string>()->default_value("cpu"),
        "cpu, cuda, or auto (CUDA when a GPU is visible and the CUDA module loads, else CPU; the "
        "choice and the reason are printed). The CUDA backend is a module (libspmd_cuda.so next to "
        "libspmd.so, or in $SPMD_MODULE_DIR) loaded only for cuda or auto on a machine with a GPU");
  return d;
}

namespace {
// As many significant digits as read back to the same float (9) or double (17).
std::string real_text(double x, int digits) {
  std::ostringstream os;
  os.precision(digits);
  os << x;
  return os.str();
}

std::string value_text(const po::variable_value& v) {
  const auto& a = v.value();
  if (auto p = boost::any_cast<std::string>(&a)) return *p;
  if (auto p = boost::any_cast<int>(&a)) return std::to_string(*p);
  if (auto p = boost::any_cast<long>(&a)) return std::to_string(*p);
  if (auto p = boost::any_cast<long long>(&a)) return std::to_string(*p);
  if (auto p = boost::any_cast<unsigned>(&a)) return std::to_string(*p);
  if (auto p = boost::any_cast<std::uint64_t>(&a)) return std::to_string(*p);
  if (auto p = boost::any_cast<double>(&a)) return real_text(*p, 17);
  if (auto p = boost::any_cast<float>(&a)) return real_text(*p, 9);
  if (auto p = boost::any_cast<bool>(&a)) return *p ? "true" : "false";
  if (auto p = boost::any_cast<std::vector<std::string>>(&a)) {
    std::string s;
    for (const auto& x : *p) s += x + ",";
    return s;
  }
  return "(set)";
}

// Boost.Program_options formats its error messages by replacing placeholders such as
// %value% with the user's text; text that itself holds a placeholder makes that loop
// forever (found by fuzzing). Such text is refused before Boost sees it.
void refuse_boost_placeholders(const std::string& text, const std::string& where) {
  for (const char* p : {"%canonical_option%", "%value%", "%option%", "%original_token%", "%prefix%", "%invalid_line%"})
    if (text.find(p) != std::string::npos)
      throw Error(where + " contains '" + p + "', which is not a valid option or value");
}

// Set before the first file is looked at (below: the inputs' identities), so that a hung
// mount during start-up ends the job too. Bad values are refused later, with the others.
void arm_io_deadline(const po::variables_map& vm) {
  if (vm.count("hang-timeout")) runtime::set_io_deadline(vm["hang-timeout"].as<double>());
  if (!vm.count("simulate-stall")) return;
  const std::string v = vm["simulate-stall"].as<std::string>();
  const auto colon = v.find(':');
  if (colon == std::string::npos || v.compare(colon + 1, 3, "io:") != 0) return;
  try {
    runtime::simulate_io_stall(std::stoi(v.substr(0, colon)), v.substr(colon + 4));
  } catch (const std::exception&) {
    // A bad RANK is refused with the option's message (context_options).
  }
}
}  // namespace

CommandLine parse_command(const std::string& command, const std::string& usage, const po::options_description& options,
                          const std::vector<std::string>& args, const std::vector<std::string>& file_options) {
  CommandLine cl;
  std::ostringstream help;
  help << "usage: spmd " << command << " " << usage << "\n\n" << options;
  cl.help_text = help.str();
  for (const auto& a : args) refuse_boost_placeholders(a, "argument '" + a.substr(0, 60) + "'");
  try {
    const auto parsed = po::command_line_parser(args).options(options).run();
    refuse_negative_unsigned(parsed, options);
    po::store(parsed, cl.vm);
    if (cl.vm.count("help")) {
      cl.help = true;
      return cl;
    }
    if (cl.vm.count("config")) {
      const std::string path = cl.vm["config"].as<std::string>();
      const std::string text = read_config_file(path);
      refuse_boost_placeholders(text, "--config '" + shortened(path) + "'");
      const auto from_file = parse_config(text, path, options);
      refuse_negative_unsigned(from_file, options);
      try {
        po::store(from_file, cl.vm);
      } catch (const po::error& e) {
        throw Error("--config '" + shortened(path) + "': " + shortened(e.what(), 400));
      }
    }
    po::notify(cl.vm);
    require_finite_reals(cl.vm);
    check_hang_timeout(cl.vm);
    arm_io_deadline(cl.vm);
    data::set_outside_files_allowed(cl.vm.count("allow-outside-files") && cl.vm["allow-outside-files"].as<bool>());
    if (cl.vm.count("max-loop-iterations")) models::set_max_loop_iterations(cl.vm["max-loop-iterations"].as<std::int64_t>());
    if (cl.vm.count("max-range-length")) ops::set_max_range_length(cl.vm["max-range-length"].as<std::int64_t>());
  } catch (const po::error& e) {
    throw Error(shortened(e.what(), 400) + " (see spmd " + command + " --help)");
  }
  cl.command = command;
  for (const auto& [name, value] : cl.vm)
    if (std::find(file_options.begin(), file_options.end(), name) != file_options.end())
      cl.inputs.push_back({name, value_text(value), {}});
  return cl;
}

namespace {
void stat_inputs(CommandLine& cl) {
  for (auto& in : cl.inputs) in.identity = data::file_identity(in.path);
}
}  // namespace

void make_canonical(CommandLine& cl) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : cl.vm) {
    if (name == "config" || name == "help") continue;
    std::string line = name + "=" + value_text(value);
    for (const auto& in : cl.inputs)
      if (in.option == name) line += data::input_file_stamp(in.identity);
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  cl.canonical = "command=" + cl.command + "\n";
  for (const auto& l : lines) cl.canonical += l + "\n";
}

runtime::ContextOptions context_options(const po::variables_map& vm) {
  runtime::ContextOptions o;
  if (vm.count("backend")) {
    o.backend = vm["backend"].as<std::string>();
    backends::check_backend_name(o.backend);
  }
  o.select = &backends::select_platform;
  if (vm.count("devices")) {
    o.devices_per_rank = vm["devices"].as<int>();
    if (o.devices_per_rank < 1 || o.devices_per_rank > 1024)
      throw Error("--devices must be between 1 and 1024 (got " + std::to_string(o.devices_per_rank) + ")");
  }
  if (vm.count("simulate-stall")) {
    const std::string v = vm["simulate-stall"].as<std::string>();
    const auto colon = v.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(v);
      o.stall_rank = std::stoi(v.substr(0, colon));
    } catch (const std::exception&) {
      throw Error("--simulate-stall must be RANK:PHASE, e.g. '1:eval step 3' (got '" + v + "')");
    }
    o.stall_phase = v.substr(colon + 1);
  }
  if (vm.count("simulate-slow")) {
    const std::string v = vm["simulate-slow"].as<std::string>();
    const auto colon = v.find(':');
    std::size_t rank_end = 0, seconds_end = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(v);
      o.slow_rank = std::stoi(v.substr(0, colon), &rank_end);
      o.slow_seconds = std::stod(v.substr(colon + 1), &seconds_end);
    } catch (const std::exception&) {
      rank_end = 0;
    }
    if (rank_end == 0 || rank_end != colon || seconds_end == 0 || seconds_end != v.size() - colon - 1 ||
        o.slow_rank < 0 || !(o.slow_seconds > 0 && o.slow_seconds <= 60))
      throw Error("--simulate-slow must be RANK:SECONDS with RANK >= 0 and 0 < SECONDS <= 60, e.g. '1:0.05' (got '" +
                  v + "')");
  }
  if (vm.count("hang-timeout")) {
    check_hang_timeout(vm);
    o.hang_timeout_s = vm["hang-timeout"].as<double>();
  }
  return o;
}

namespace {
double numeric(const po::variable_value& v) {
  const auto& a = v.value();
  if (auto p = boost::any_cast<int>(&a)) return *p;
  if (auto p = boost::any_cast<long>(&a)) return static_cast<double>(*p);
  if (auto p = boost::any_cast<long long>(&a)) return static_cast<double>(*p);
  if (auto p = boost::any_cast<double>(&a)) return *p;
  if (auto p = boost::any_cast<float>(&a)) return *p;
  if (auto p = boost::any_cast<std::uint64_t>(&a)) return static_cast<double>(*p);
  if (auto p = boost::any_cast<unsigned>(&a)) return *p;
  throw Error("internal: option is not numeric");
}

// A NaN breaks every rule (the comparisons are false).
void require_rule(const po::variables_map& vm, const std::string& name, bool (*holds)(double), const char* rule) {
  if (vm.count(name) && !holds(numeric(vm[name])))
    throw Error("--" + name + " must be " + rule + " (got " + value_text(vm[name]) + ")");
}
}  // namespace

void require_positive(const po::variables_map& vm, const std::string& name) {
  require_rule(vm, name, [](double x) { return x > 0; }, "> 0");
}

void require_non_negative(const po::variables_map& vm, const std::string& name) {
  require_rule(vm, name, [](double x) { return x >= 0; }, ">= 0");
}

void require_at_most(const po::variables_map& vm, const std::string& name, double limit, const std::string& why) {
  if (!vm.count(name)) return;
  if (!(numeric(vm[name]) <= limit))
    throw Error("--" + name + " must be at most " + std::to_string(static_cast<long long>(limit)) + " (got " + value_text(vm[name]) + "): " + why);
}

void require_present(const po::variables_map& vm, const std::string& name, const std::string& why) {
  if (!vm.count(name)) throw Error("--" + name + " is required" + (why.empty() ? "" : ": " + why));
}

void require_readable_file(const po::variables_map& vm, const std::string& name) {
  if (vm.count(name)) data::require_readable_file(name, vm[name].as<std::string>());
}

void require_writable_destination(const po::variables_map& vm, const std::string& name) {
  if (!vm.count(name)) return;
  namespace fs = std::filesystem;
  const fs::path p(vm[name].as<std::string>());
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  const runtime::IoDeadline deadline("open", dir.string());
  if (!fs::is_directory(dir, ec))
    throw Error("--" + name + " '" + p.string() + "': folder '" + dir.string() + "' does not exist");
  if (fs::is_directory(p, ec)) throw Error("--" + name + " '" + p.string() + "': is a directory, expected a file name");
  if (const std::string why = data::replace_refusal(p.string()); !why.empty())
    throw Error("--" + name + " " + why + "; nothing was started");
  // Probe by creating a file, as the final write will (a temporary file, then a rename):
  // permission bits alone miss read-only mounts and dropped capabilities.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const fs::path probe = dir / (".spmd-write-probe." + std::string(host) + "." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0)
    throw Error("--" + name + " '" + p.string() + "': folder '" + dir.string() + "' is not writable (" +
                std::strerror(errno) + "); nothing was started");
  ::close(fd);
  ::unlink(probe.c_str());
}

void require_inputs_unchanged(const CommandLine& cl, const std::string& when) {
  runtime::agree_on(MPI_COMM_WORLD, [&] {
    if (!cl.checks_files) return;
    for (const auto& in : cl.inputs) {
      const auto now = data::file_identity(in.path);
      if (now == in.identity) continue;
      throw Error("--" + in.option + " '" + in.path + "' changed while this run used it (" +
                  data::describe_change(in.identity, now) + "; noticed " + when +
                  "): the results would mix two versions of the file. Copy an input that another job rewrites "
                  "before running on it.");
    }
  });
}

std::string json_path(const po::variables_map& vm) { return vm.count("json") ? vm["json"].as<std::string>() : ""; }

namespace {
// The node's rank 0 sends its identities of the inputs to the node's other ranks, with each
// input's absolute path: a rank whose path differs (another working directory) stats the file
// itself, so that two files behind one relative path are still told apart. Every rank parsed
// the same options, so the lists match in length; if they did not, the options differ and
// the identity check after this says so.
void share_identities(MPI_Comm node, CommandLine& cl) {
  constexpr std::size_t kFields = 5;  // path hash, device, inode, size, mtime
  std::vector<std::uint64_t> wire;
  const auto absolute_hash = [](const std::string& path) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(path, ec);  // lexical: no file-system access
    return static_cast<std::uint64_t>(std::hash<std::string>{}(ec ? path : absolute.lexically_normal().string()));
  };
  for (const auto& in : cl.inputs)
    wire.insert(wire.end(), {absolute_hash(in.path), in.identity.device, in.identity.inode,
                             static_cast<std::uint64_t>(in.identity.size), static_cast<std::uint64_t>(in.identity.mtime_ns)});
  long long count = static_cast<long long>(wire.size());
  SPMD_CHECK_MPI(MPI_Bcast(&count, 1, MPI_LONG_LONG, 0, node), "sharing the inputs' identities within the node");
  wire.resize(static_cast<std::size_t>(count));
  SPMD_CHECK_MPI(MPI_Bcast(wire.data(), static_cast<int>(count), MPI_UINT64_T, 0, node),
                 "sharing the inputs' identities within the node");
  if (cl.checks_files) return;
  for (std::size_t i = 0; i < cl.inputs.size(); ++i) {
    auto& in = cl.inputs[i];
    const std::uint64_t* f = kFields * i + kFields <= wire.size() ? &wire[kFields * i] : nullptr;
    if (!f || f[0] != absolute_hash(in.path)) {
      in.identity = data::file_identity(in.path);
      continue;
    }
    in.identity = {f[1], f[2], static_cast<std::int64_t>(f[3]), static_cast<std::int64_t>(f[4])};
  }
}

// Ranks started in different working directories (mpirun -wdir A ... : -wdir B ..., some
// schedulers) would each resolve a relative output to another file, and the collective
// create of an MPI-IO output waits for ever. When the directories differ, every relative
// output is made absolute against rank 0's, the same text on every rank, and rank 0 says so.
void resolve_outputs_in_one_directory(CommandLine& cl, const std::vector<std::string>& outputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string cwd = fs::current_path(ec).string();
  const auto local = static_cast<long long>(runtime::stable_hash(cwd) >> 1);
  long long lowest = local, highest = local;
  SPMD_CHECK_MPI(MPI_Allreduce(&local, &lowest, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "comparing working directories");
  SPMD_CHECK_MPI(MPI_Allreduce(&local, &highest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "comparing working directories");
  if (lowest == highest) return;
  long long length = static_cast<long long>(cwd.size());
  SPMD_CHECK_MPI(MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "sharing rank 0's working directory");
  cwd.resize(static_cast<std::size_t>(length));
  SPMD_CHECK_MPI(MPI_Bcast(cwd.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD),
                 "sharing rank 0's working directory");
  std::string said;
  for (const auto& name : outputs) {
    if (!cl.vm.count(name)) continue;
    const fs::path path(cl.vm[name].as<std::string>());
    if (path.empty() || path.is_absolute()) continue;
    const std::string absolute = (fs::path(cwd) / path).lexically_normal().string();
    cl.vm.at(name).value() = absolute;
    said += " --" + name + " '" + absolute + "'";
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && !said.empty())
    std::printf("# the ranks run in different working directories: relative outputs are written where rank 0 "
                "would (%s):%s\n", cwd.c_str(), said.c_str());
}

std::vector<data::FileArgument> file_arguments(const po::variables_map& vm, const std::vector<std::string>& names,
                                               const std::vector<std::string>& mpi_io) {
  std::vector<data::FileArgument> out;
  for (const auto& name : names)
    if (vm.count(name))
      out.push_back({name, vm[name].as<std::string>(), std::find(mpi_io.begin(), mpi_io.end(), name) != mpi_io.end()});
  return out;
}

// Every command reads --config and writes --json.
std::vector<std::string> with_common(std::vector<std::string> names, const char* common) {
  names.push_back(common);
  return names;
}

void require_safe_outputs(const po::variables_map& vm, const FileOptions& files) {
  const auto inputs = with_common(files.inputs, "config"), outputs = with_common(files.outputs, "json");
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  data::require_safe_outputs(file_arguments(vm, inputs, files.mpi_io), file_arguments(vm, outputs, files.mpi_io), ranks);
}
}  // namespace

CommandLine parse_validated(const std::string& command, const std::string& usage, const po::options_description& options,
                            const std::vector<std::string>& args, const FileOptions& files,
                            const std::function<void(const po::variables_map&)>& validate) {
  CommandLine cl;
  // The options are checked once per node (they touch the file system: inputs readable,
  // destinations writable); every rank parses them, and they must be the same everywhere.
  // The inputs' identities too are taken once per node and shared with the node's ranks:
  // thousands of ranks stat-ing one file at once load a parallel file system's metadata
  // server for nothing, while a file that differs between nodes is still caught.
  runtime::NodeComm node(MPI_COMM_WORLD);
  const bool checks_here = node.rank() == 0;
  runtime::set_io_phase("start-up: option and input checks");
  runtime::agree_on(MPI_COMM_WORLD, [&] {
    cl = parse_command(command, usage, options, args, files.inputs);
    cl.checks_files = checks_here;
  });
  if (cl.help) {
    print_root(cl.help_text);
    return cl;
  }
  resolve_outputs_in_one_directory(cl, with_common(files.outputs, "json"));
  runtime::agree_on(MPI_COMM_WORLD, [&] {
    if (!checks_here) return;
    stat_inputs(cl);
    context_options(cl.vm);
    require_writable_destination(cl.vm, "json");
    require_safe_outputs(cl.vm, files);
    if (validate) validate(cl.vm);
    // Last: the inputs are known to be readable files now.
    for (const auto& in : cl.inputs) data::require_hdf5_walk_survives(in.path);
  });
  share_identities(node.comm(), cl);
  // On every rank: a file an input links to (a virtual dataset's source, ...) that is one of
  // these is refused when the input is opened.
  data::set_run_outputs(file_arguments(cl.vm, with_common(files.outputs, "json"), files.mpi_io));
  make_canonical(cl);
  runtime::require_identical_on_all_ranks(MPI_COMM_WORLD, cl.canonical, "options or input files");
  return cl;
}

void on_root(const std::function<void()>& fn) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  runtime::agree_on(MPI_COMM_WORLD, [&] {
    if (rank == 0) fn();
  });
}

int run_subcommand(const std::string& command, const std::vector<std::string>& args, const char* usage,
                   const std::map<std::string, Subcommand>& subcommands) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_root(usage);
    return args.empty() ? 2 : 0;
  }
  const auto it = subcommands.find(args[0]);
  if (it == subcommands.end())
    throw CollectiveError("spmd " + command + ": unknown subcommand '" + args[0] + "'\n" + usage);
  return it->second(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace spmd::cli
