// SPDX-License-Identifier: BSD-3-Clause
// Trains a small CNN on synthetic images under kinetoscope::profile, the way the PyTorch
// profiler tutorial profiles a training loop:
//
//   with torch.profiler.profile(
//           schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2),
//           on_trace_ready=torch.profiler.tensorboard_trace_handler("log/cnn"),
//           record_shapes=True, profile_memory=True, with_flops=True, with_modules=True) as prof:
//       for step, (images, labels) in enumerate(loader):
//           optimizer.zero_grad()
//           loss = F.cross_entropy(model(images), labels)
//           loss.backward()
//           optimizer.step()
//           prof.step()
//
// Everything is plain C++ (cnn/): tensors on a tracking allocator, aten-named ops with shapes,
// an autograd engine on its own thread, a background data loader, SGD. Two windows of three
// steps are written to <logdir>/<run>/ as .pt.trace.json files, each window's per-step
// scalars (step time, breakdown, peak memory; see kinetoscope/tensorboard/scalars.hpp) are appended to an
// events.out.tfevents.* file in the same directory, then the table of the last window is printed,
// followed by the model's DeepSpeed-style module profile (print_model_profile).
//
// Usage: cnn_train [--logdir DIR] [--run NAME] [--steps N] [--gzip] [--with-stack]
// The KINETOSCOPE_* variables of profile_config.hpp override these options, e.g.
//   KINETOSCOPE_SCHEDULE=wait=2,warmup=1,active=2 KINETOSCOPE_WITH_STACK=1 cnn_train
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <kinetoscope/kinetoscope.hpp>
#include <kinetoscope/writer/profile_config.hpp>
#include <kinetoscope/tensorboard/scalars.hpp>
#include <kinetoscope/writer/trace_handler.hpp>

#include "cnn/autograd.hpp"
#include "cnn/data_loader.hpp"
#include "cnn/nn.hpp"
#include "cnn/ops.hpp"
#include "cnn/optim.hpp"

namespace {

namespace fs = std::filesystem;

struct options {
  std::string logdir = "log";
  std::string run = "cnn";
  long steps = 12;
  bool gzip = false;
  bool with_stack = false;  ///< native call stacks: "Call stack" args, a by-stack table, stacks file
};

[[noreturn]] void usage(const char* argv0, int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: %s [--logdir DIR] [--run NAME] [--steps N] [--gzip] [--with-stack]\n"
               "  Trains a small CNN on synthetic images under the profiler and writes\n"
               "  <DIR>/<NAME>/<worker>.<ms>.pt.trace.json[.gz] (defaults: log, cnn, 12 steps)\n"
               "  and the per-step scalars to <DIR>/<NAME>/events.out.tfevents.*.\n"
               "  --with-stack also records call stacks and writes <DIR>/<NAME>.stacks.txt\n"
               "  (folded stacks of self CPU time, for flamegraph.pl or speedscope).\n"
               "  KINETOSCOPE_* variables override the profile's options (README: \"Profiling\n"
               "  without recompiling\"); KINETOSCOPE_PROFILE=0 trains unprofiled.\n",
               argv0);
  std::exit(status);
}

options parse_args(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], 2);
      return argv[++i];
    };
    if (a == "--logdir") {
      opt.logdir = value();
    } else if (a == "--run") {
      opt.run = value();
    } else if (a == "--steps") {
      const std::string v = value();
      char* end = nullptr;
      opt.steps = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || opt.steps < 1) usage(argv[0], 2);
    } else if (a == "--gzip") {
      opt.gzip = true;
    } else if (a == "--with-stack") {
      opt.with_stack = true;
    } else if (a == "--help" || a == "-h") {
      usage(argv[0], 0);
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
      usage(argv[0], 2);
    }
  }
  return opt;
}

/// Trace files currently in `dir` (none if it does not exist yet).
std::set<fs::path> trace_files(const fs::path& dir) {
  std::set<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().filename().string().find(".pt.trace.json") !=
                                       std::string::npos)
      files.insert(entry.path());
  return files;
}

/// Everything the loop needs, built before profiling starts.
struct trainer {
  explicit trainer(const cnn::data::synthetic_images& dataset, long steps)
      : loader(dataset, {.batch_size = 16, .num_batches = steps, .prefetch = 2, .seed = 3}) {}

  cnn::data::data_loader loader;  // starts the "dataloader" thread
  cnn::nn::small_cnn model{/*seed=*/1};
  cnn::optim::sgd optimizer{model.parameters(),
                            {.lr = 0.005, .momentum = 0.9, .weight_decay = 5e-4}};
  cnn::autograd::engine engine;  // starts the "pt_autograd_0" thread
  cnn::nn::cross_entropy_loss criterion;

  /// One iteration; returns loss.item(), or nothing when the loader is exhausted. The batch,
  /// the graph and every temporary die in here, so their frees land inside the step.
  std::optional<float> train_step() {
    const std::optional<cnn::data::batch> batch = loader.next();
    if (!batch) return std::nullopt;
    optimizer.zero_grad();
    const cnn::autograd::variable logits = model.forward(batch->images);
    const cnn::autograd::variable loss = criterion(logits, batch->labels);
    engine.backward(loss);
    optimizer.step();
    return cnn::aten::item(loss.data);
  }
};

double mean(const std::vector<float>& v, std::size_t first, std::size_t count) {
  double sum = 0.0;
  for (std::size_t i = first; i < first + count; ++i) sum += v[i];
  return sum / double(count);
}

/// --with-stack: the top rows by (name, innermost 2 frames), and the folded stacks file.
void print_stacks(const kinetoscope::profile& prof, const fs::path& path) {
  std::cout << '\n'
            << prof.key_averages(false, 2).table({.sort_by = "self_cpu_time_total", .row_limit = 5});
  prof.export_stacks(path.string());
  std::printf("\nstacks written to %s\n", path.string().c_str());
}

/// The sample's own profile: the tutorial's schedule and options, then whatever KINETOSCOPE_*
/// variables (or the JSON file named by KINETOSCOPE_CONFIG) say over them, as any program
/// using profile_config.hpp can do. Traces go to `trace_dir` with per-step scalars.
kinetoscope::profile_options profile_options_for(const options& opt,
                                                 kinetoscope::profile_config env,
                                                 const fs::path& trace_dir) {
  kinetoscope::profile_options popts{
      .schedule = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 2}),
      .record_shapes = true,
      .profile_memory = true,
      .with_stack = opt.with_stack,
      .with_flops = true,
      .with_modules = true,
  };
  env.output_trace_dir.reset();  // installed below, with the scalars
  kinetoscope::apply_profile_config(env, popts);
  popts.on_trace_ready = kinetoscope::tensorboard_trace_handler_with_scalars(
      trace_dir.string(), "", env.use_gzip.value_or(opt.gzip));
  return popts;
}

int run(const options& opt) {
  const kinetoscope::profile_config env = kinetoscope::profile_config_from_env();
  const fs::path trace_dir = env.output_trace_dir ? fs::path(*env.output_trace_dir)
                                                  : fs::path(opt.logdir) / opt.run;
  const std::set<fs::path> files_before = trace_files(trace_dir);

  const cnn::data::synthetic_images dataset({.size = 4096, .num_classes = 10, .image_size = 32,
                                             .noise_std = 1.0, .seed = 7});
  trainer t(dataset, opt.steps);

  // KINETOSCOPE_PROFILE=0 trains without the profiler (the baseline to compare step times with).
  std::optional<kinetoscope::profile> prof;
  if (env.enabled.value_or(true)) prof.emplace(profile_options_for(opt, env, trace_dir));
  const bool with_stack = prof && prof->options().with_stack;

  if (prof)
    std::printf("training %ld steps, batch 16, images 3x32x32, traces -> %s\n", opt.steps,
                trace_dir.string().c_str());
  else
    std::printf("training %ld steps, batch 16, images 3x32x32, not profiled (KINETOSCOPE_PROFILE)\n",
                opt.steps);
  std::vector<float> losses;
  if (prof) prof->start();
  for (long step = 0; step < opt.steps; ++step) {
    const char* action = prof ? kinetoscope::to_string(prof->current_action()) : "off";
    const auto t0 = std::chrono::steady_clock::now();
    const std::optional<float> loss = t.train_step();
    if (!loss) break;
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - t0;
    std::printf("step %2ld  loss %.4f  %6.2f ms  [%s]\n", step, double(*loss), ms.count(), action);
    std::fflush(stdout);
    losses.push_back(*loss);
    if (prof) prof->step();
  }
  if (prof) prof->stop();
  if (losses.size() >= 6)
    std::printf("mean loss: first 3 steps %.4f, last 3 steps %.4f\n", mean(losses, 0, 3),
                mean(losses, losses.size() - 3, 3));
  if (!prof) return 0;

  std::cout << '\n'
            << prof->key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 15});
  std::cout << kinetoscope::print_model_profile(prof->last_trace(),
                                                {.module_depth = 2, .top_modules = 3});

  if (with_stack)
    print_stacks(*prof, trace_dir.parent_path() / (trace_dir.filename().string() + ".stacks.txt"));

  std::printf("\ntrace files written to %s:\n", trace_dir.string().c_str());
  for (const fs::path& f : trace_files(trace_dir))
    if (!files_before.contains(f))
      std::printf("  %s  (%ju bytes)\n", f.filename().string().c_str(),
                  static_cast<std::uintmax_t>(fs::file_size(f)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_train: %s\n", e.what());
    return 1;
  }
}
