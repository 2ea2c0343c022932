// spmd data: prepare and inspect datasets. Serial work: rank 0 does it, the other ranks
// (if launched under mpirun) wait and share its verdict.
#include <chrono>

#include "command.hpp"
#include "commands.hpp"
#include "spmd/data/dataset_keys.hpp"
#include "spmd/data/describe.hpp"
#include "spmd/data/fashion_mnist.hpp"
#include "spmd/data/make_classification.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

namespace {

const char* kDataUsage =
    "usage: spmd data <fashion-mnist|make-classification|info> [options]\n"
    "  fashion-mnist --out DIR [--source DIR]   convert Debian's dataset-fashion-mnist to DIR/{train,test}.h5\n"
    "  make-classification --out FILE [...]     generate a classification set (sklearn's algorithm)\n"
    "  info FILE [--json FILE]                  datasets, shapes, dtypes, label histogram\n";

int fashion_mnist(const Args& args) {
  po::options_description options("spmd data fashion-mnist options");
  options.add_options()("out", po::value<std::string>(), "output folder for train.h5 and test.h5 (required; created)")(
      "source", po::value<std::string>()->default_value(data::default_fashion_mnist_dir()),
      "folder with the gzip IDX files (Debian: apt-get install dataset-fashion-mnist)");
  options.add(common_options(false));
  const auto cl = parse_validated("data fashion-mnist", "--out DIR", options, args, {},
                                  [](const po::variables_map& vm) { require_present(vm, "out"); });
  if (cl.help) return 0;
  on_root([&] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto s = data::convert_fashion_mnist(cl.vm["source"].as<std::string>(), cl.vm["out"].as<std::string>());
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_root(workloads::format("fashion-mnist: %s (%lld examples), %s (%lld examples) in %.2f s\n", s.train_path.c_str(),
                                 static_cast<long long>(s.train_rows), s.test_path.c_str(),
                                 static_cast<long long>(s.test_rows), sec));
    if (!json_path(cl.vm).empty())
      workloads::write_json(json_path(cl.vm), {{"train", s.train_path}, {"test", s.test_path},
                                               {"train_rows", s.train_rows}, {"test_rows", s.test_rows}});
  });
  return 0;
}

int make_classification(const Args& args) {
  data::ClassificationParams d;
  po::options_description options("spmd data make-classification options (sklearn's names and defaults)");
  options.add_options()("out", po::value<std::string>(), "output HDF5 file: X float32 [N, F], y int32 [N] (required)")(
      "samples", po::value<std::int64_t>()->default_value(d.n_samples), "n_samples")(
      "features", po::value<int>()->default_value(d.n_features), "n_features")(
      "informative", po::value<int>()->default_value(d.n_informative), "n_informative")(
      "redundant", po::value<int>()->default_value(d.n_redundant), "n_redundant")(
      "repeated", po::value<int>()->default_value(d.n_repeated), "n_repeated")(
      "classes", po::value<int>()->default_value(d.n_classes), "n_classes")(
      "clusters-per-class", po::value<int>()->default_value(d.n_clusters_per_class), "n_clusters_per_class")(
      "class-sep", real_value(d.class_sep), "class_sep")(
      "flip-y", real_value(d.flip_y), "flip_y: fraction of labels assigned at random")(
      "no-hypercube", po::bool_switch(), "hypercube=False: cluster centres at random points instead of vertices")(
      "shift", real_value(0.0), "shift added to every feature")(
      "scale", real_value(1.0), "scale multiplying every feature")(
      "no-shuffle", po::bool_switch(), "shuffle=False")(
      "seed", po::value<std::uint64_t>()->default_value(0), "random_state (our own stream: not sklearn's bits)");
  options.add(common_options(false));
  auto params = [](const po::variables_map& vm) {
    data::ClassificationParams p;
    p.n_samples = vm["samples"].as<std::int64_t>();
    p.n_features = vm["features"].as<int>();
    p.n_informative = vm["informative"].as<int>();
    p.n_redundant = vm["redundant"].as<int>();
    p.n_repeated = vm["repeated"].as<int>();
    p.n_classes = vm["classes"].as<int>();
    p.n_clusters_per_class = vm["clusters-per-class"].as<int>();
    p.class_sep = vm["class-sep"].as<double>();
    p.flip_y = vm["flip-y"].as<double>();
    p.hypercube = !vm["no-hypercube"].as<bool>();
    p.shift = std::vector<double>{vm["shift"].as<double>()};
    p.scale = std::vector<double>{vm["scale"].as<double>()};
    p.shuffle = !vm["no-shuffle"].as<bool>();
    p.random_state = vm["seed"].as<std::uint64_t>();
    return p;
  };
  const auto cl = parse_validated("data make-classification", "--out FILE [options]", options, args, {.inputs = {}, .outputs = {"out"}, .mpi_io = {}},
                                  [&](const po::variables_map& vm) {
                                    require_present(vm, "out");
                                    require_writable_destination(vm, "out");
                                    data::validate(params(vm));
                                  });
  if (cl.help) return 0;
  on_root([&] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto p = params(cl.vm);
    const auto out = cl.vm["out"].as<std::string>();
    const auto data = data::make_classification_file(out, p);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_root(workloads::format("make-classification: %s  X [%lld, %d] float32, y [%lld] int32, %d classes, seed %llu, %.2f s\n",
                                 out.c_str(), static_cast<long long>(data.n_samples), data.n_features,
                                 static_cast<long long>(data.n_samples), data.n_classes,
                                 static_cast<unsigned long long>(data.seed), sec));
    if (!json_path(cl.vm).empty())
      workloads::write_json(json_path(cl.vm), {{"out", out}, {"samples", data.n_samples}, {"features", data.n_features},
                                               {"classes", data.n_classes}, {"seconds", sec}});
  });
  return 0;
}

int info(const Args& args) {
  po::options_description options("spmd data info options");
  options.add_options()("file", po::value<std::string>(), "HDF5 file to describe (also the first positional argument)");
  options.add(common_options(false));
  Args with_flag = args;
  if (!with_flag.empty() && with_flag[0].rfind("-", 0) != 0) with_flag.insert(with_flag.begin(), "--file");
  const auto cl = parse_validated("data info", "FILE [--json OUT]", options, with_flag, {.inputs = {"file"}, .outputs = {}, .mpi_io = {}},
                                  [](const po::variables_map& vm) {
                                    require_present(vm, "file");
                                    require_readable_file(vm, "file");
                                  });
  if (cl.help) return 0;
  on_root([&] {
    const std::string path = cl.vm["file"].as<std::string>();
    const auto d = data::describe_file(path);
    // What eval, logreg and ensemble would read with no key option: a preview, not an error.
    nlohmann::json keys = nullptr;
    std::string keys_text = "none found: eval, logreg and ensemble need --features-key and --labels-key";
    try {
      const auto resolved = data::resolve_dataset_keys(path, {});
      keys = data::to_json(resolved);
      keys_text = resolved.describe();
    } catch (const Error&) {
    }
    print_root(data::to_text(d) + "\nkeys without --features-key/--labels-key: " + keys_text + "\n");
    if (!json_path(cl.vm).empty()) {
      auto j = data::to_json(d);
      j["keys"] = keys;
      workloads::write_json(json_path(cl.vm), j);
    }
  });
  return 0;
}

}  // namespace

int cmd_data(const Args& args) {
  return run_subcommand("data", args, kDataUsage,
                        {{"fashion-mnist", fashion_mnist}, {"make-classification", make_classification}, {"info", info}});
}

}  // namespace spmd::cli
