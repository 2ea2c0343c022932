// bench_cnn: training and eval throughput of the ensemble CNN on ONE CPU core, per kernel
// set, optionally against PyTorch (tools/bench/torch_cnn_reference.py).
//
//   bench_cnn [--isa auto|avx2|avx512|blas|all] [--runs N] [--train-batch B] [--eval-batch E]
//             [--no-torch] [--json FILE]
//
// Training = forward + backward + SGD-momentum update of one member (batch 32 by default);
// eval = forward + softmax (batch 512). Each figure is the median over --runs timed runs
// after a warm-up. Wall-clock rates are the headline; rates by the thread's CPU time are
// printed beside them because this VM's cores are shared (they agree on an idle machine).
// Exit status 1 when an argument is wrong or a run fails.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/error.hpp"
#include "python_peer.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

using namespace spmd::models;

// The model benchmarked: the default geometry.
const CnnLayout kLayout(CnnConfig::seed_default());

// Multiply-adds x 2 per image, from the layer shapes. The backward pass has a weight
// gradient and an input gradient per layer, each as large as the forward product, except
// the first conv layer, whose input (the images) needs no gradient.
double forward_flops(const CnnLayout& layout) { return 2.0 * static_cast<double>(layout.forward_multiply_adds()); }
double backward_flops(const CnnLayout& layout) {
  const auto& first = layout.convs().front();
  const double first_conv = static_cast<double>(first.pixels()) * first.patch() * first.out_channels;
  return 2.0 * (2.0 * static_cast<double>(layout.forward_multiply_adds()) - first_conv);
}
const double kForwardFlops = forward_flops(kLayout);
const double kTrainFlops = kForwardFlops + backward_flops(kLayout);

struct Options {
  std::vector<cnn_cpu::Isa> isas;
  int runs = 7;
  int train_batch = 32;
  int eval_batch = 512;
  bool torch = true;
  std::string json_path;
};

struct Rates {
  double wall = 0, cpu = 0, wall_min = 0, wall_max = 0;
};

struct Result {
  cnn_cpu::Isa isa;
  Rates train, eval;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs fn `calls` times per timed run; returns images/s over `runs` runs.
template <class Fn>
Rates measure(Fn&& fn, int images_per_call, int calls, int runs, int warmup_calls) {
  for (int i = 0; i < warmup_calls; ++i) fn(i);
  std::vector<double> wall, cpu;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    for (int i = 0; i < calls; ++i) fn(i);
    const double cs = thread_cpu_seconds() - c0;
    const double ws = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wall.push_back(images_per_call * calls / ws);
    cpu.push_back(images_per_call * calls / cs);
  }
  return {median(wall), median(cpu), *std::min_element(wall.begin(), wall.end()),
          *std::max_element(wall.begin(), wall.end())};
}

Result bench_isa(cnn_cpu::Isa isa, const Options& opt) {
  // Distinct batches so that caches do not hold one batch's images across steps.
  const int pool_batches = 8;
  const int pool = std::max(opt.train_batch * pool_batches, opt.eval_batch);
  const std::size_t pixels = static_cast<std::size_t>(kLayout.input_size());
  const int classes = kLayout.classes();
  std::vector<float> images(static_cast<std::size_t>(pool) * pixels);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(pool));
  RandomStream stream(Key(99));
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(uniform_open01(stream.word(i)));
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(stream.word(images.size() + i) % static_cast<std::uint64_t>(classes));

  CnnParams params(kLayout.config()), trace(params.shared_layout());
  cnn_init(params, ensemble_member_key(0, 0, 1));
  CnnWorkspace ws(params.shared_layout(), std::max(opt.train_batch, opt.eval_batch), opt.train_batch, isa);
  std::vector<float> probs(static_cast<std::size_t>(std::max(opt.train_batch, opt.eval_batch)) *
                           static_cast<std::size_t>(classes));
  // A small learning rate keeps the parameters finite over many benchmark steps.
  const spmd::optim::SgdMomentum sgd{0.01f, 0.9f};

  Result res{ws.isa(), {}, {}};
  res.train = measure(
      [&](int i) {
        const std::size_t b = static_cast<std::size_t>(i % pool_batches) * static_cast<std::size_t>(opt.train_batch);
        cnn_train_step(params, trace, sgd, images.data() + b * pixels, labels.data() + b, opt.train_batch, probs.data(),
                       ws);
      },
      opt.train_batch, std::max(1, 640 / opt.train_batch), opt.runs, 10);
  res.eval = measure([&](int) { cnn_forward(params, images.data(), opt.eval_batch, probs.data(), ws); },
                     opt.eval_batch, std::max(1, 1536 / opt.eval_batch), opt.runs, 1);
  return res;
}

// PyTorch's figures via the reference script, or an empty object with "error".
nlohmann::json run_torch_reference(int runs) {
  return spmd::bench::run_python_peer(__FILE__, "torch_cnn_reference.py", "--json --runs " + std::to_string(runs));
}

Options parse(int argc, char** argv) {
  Options opt;
  std::string isa = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw spmd::Error("option '" + a + "' needs a value");
      return argv[++i];
    };
    const auto positive = [&](const std::string& v) {
      const int n = std::atoi(v.c_str());
      if (n < 1) throw spmd::Error("option '" + a + "' must be a positive integer, got '" + v + "'");
      return n;
    };
    if (a == "--isa") isa = value();
    else if (a == "--runs") opt.runs = positive(value());
    else if (a == "--train-batch") opt.train_batch = positive(value());
    else if (a == "--eval-batch") opt.eval_batch = positive(value());
    else if (a == "--no-torch") opt.torch = false;
    else if (a == "--json") opt.json_path = value();
    else if (a == "--help" || a == "-h") {
      std::printf("usage: bench_cnn [--isa auto|avx2|avx512|blas|all] [--runs N] [--train-batch B] "
                  "[--eval-batch E] [--no-torch] [--json FILE]\n");
      std::exit(0);
    } else {
      throw spmd::Error("unknown option '" + a + "' (see --help)");
    }
  }
  if (isa == "all") {
    for (auto candidate : {cnn_cpu::Isa::Avx512, cnn_cpu::Isa::Avx2, cnn_cpu::Isa::Blas})
      if (cnn_cpu::isa_supported(candidate)) opt.isas.push_back(candidate);
  } else {
    opt.isas.push_back(cnn_cpu::resolve_isa(cnn_cpu::parse_isa(isa)));
  }
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    // The Blas kernel set must not fan out over the other (shared) core.
    openblas_set_num_threads(1);
    std::printf("# bench_cnn: ensemble CNN (%s), one thread; train = fwd+bwd+SGD at batch %d, eval = fwd at batch %d\n",
                kLayout.config().describe().c_str(), opt.train_batch, opt.eval_batch);
    std::printf("# %.1f MFLOP per training image, %.1f per eval image; median of %d runs after warm-up\n",
                kTrainFlops / 1e6, kForwardFlops / 1e6, opt.runs);
    std::printf("# %-8s %12s %12s %14s %9s %12s %12s %9s\n", "kernels", "train img/s", "(cpu time)", "(min..max)",
                "GFLOP/s", "eval img/s", "(cpu time)", "GFLOP/s");
    nlohmann::json report = {{"train_batch", opt.train_batch}, {"eval_batch", opt.eval_batch}, {"runs", opt.runs}};
    double best_train = 0, best_eval = 0, best_train_cpu = 0, best_eval_cpu = 0;
    for (auto isa : opt.isas) {
      const Result r = bench_isa(isa, opt);
      char range[32];
      std::snprintf(range, sizeof range, "%.0f..%.0f", r.train.wall_min, r.train.wall_max);
      std::printf("  %-8s %12.0f %12.0f %14s %9.1f %12.0f %12.0f %9.1f\n", cnn_cpu::to_string(r.isa), r.train.wall,
                  r.train.cpu, range, r.train.wall * kTrainFlops / 1e9, r.eval.wall, r.eval.cpu,
                  r.eval.wall * kForwardFlops / 1e9);
      std::fflush(stdout);
      report["spmd"].push_back({{"kernels", cnn_cpu::to_string(r.isa)},
                                {"train_images_per_s", r.train.wall},
                                {"train_images_per_s_cpu_time", r.train.cpu},
                                {"eval_images_per_s", r.eval.wall},
                                {"eval_images_per_s_cpu_time", r.eval.cpu}});
      best_train = std::max(best_train, r.train.wall);
      best_eval = std::max(best_eval, r.eval.wall);
      best_train_cpu = std::max(best_train_cpu, r.train.cpu);
      best_eval_cpu = std::max(best_eval_cpu, r.eval.cpu);
    }
    if (opt.torch) {
      const nlohmann::json torch = run_torch_reference(opt.runs);
      report["torch"] = torch;
      if (torch.contains("error")) {
        std::printf("# PyTorch reference skipped: %s\n", torch["error"].get<std::string>().c_str());
      } else {
        std::printf("# PyTorch %s (%d thread, OPENBLAS_CORETYPE='%s')\n", torch["torch"].get<std::string>().c_str(),
                    torch["threads"].get<int>(), torch["openblas_coretype"].get<std::string>().c_str());
        double torch_train = 0, torch_eval = 0, torch_train_cpu = 0, torch_eval_cpu = 0;
        for (const auto& v : torch["results"]) {
          const double train = v["train_images_per_s"].get<double>(), eval = v["eval_images_per_s"].get<double>();
          const double train_cpu = v.value("train_images_per_s_cpu_time", 0.0);
          const double eval_cpu = v.value("eval_images_per_s_cpu_time", 0.0);
          std::printf("  %-8s %12.0f %12.0f %14s %9.1f %12.0f %12.0f %9.1f\n",
                      (v["variant"].get<std::string>() == "nchw" ? "torch" : "torch-cl"), train, train_cpu, "",
                      train * kTrainFlops / 1e9, eval, eval_cpu, eval * kForwardFlops / 1e9);
          torch_train = std::max(torch_train, train);
          torch_eval = std::max(torch_eval, eval);
          torch_train_cpu = std::max(torch_train_cpu, train_cpu);
          torch_eval_cpu = std::max(torch_eval_cpu, eval_cpu);
        }
        std::printf("# torch = NCHW, torch-cl = channels_last\n");
        std::printf("# best SPMD / best PyTorch: train %.2fx (by cpu time %.2fx), eval %.2fx (by cpu time %.2fx)\n",
                    best_train / torch_train, best_train_cpu / torch_train_cpu, best_eval / torch_eval,
                    best_eval_cpu / torch_eval_cpu);
        report["ratio_train"] = best_train / torch_train;
        report["ratio_eval"] = best_eval / torch_eval;
        report["ratio_train_cpu_time"] = best_train_cpu / torch_train_cpu;
        report["ratio_eval_cpu_time"] = best_eval_cpu / torch_eval_cpu;
      }
    }
    if (!opt.json_path.empty()) {
      std::ofstream out(opt.json_path);
      out << report.dump(2) << "\n";
      if (!out) throw spmd::Error("cannot write --json file '" + opt.json_path + "'");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cnn: error: %s\n", e.what());
    return 1;
  }
}
