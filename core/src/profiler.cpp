// SPDX-License-Identifier: BSD-3-Clause
// profile: lifecycle, the schedule's transition table (docs/profiler-rules.md#schedule), step
// markers, on_trace_ready, and the last completed window.
#include "kinetoscope/profiler.hpp"

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>

#include "clock.hpp"
#include "collector.hpp"
#include "cuda_backend.hpp"
#include "kinetoscope/record_function.hpp"
#include "log.hpp"
#include "registry.hpp"

namespace kinetoscope {
namespace {

std::atomic<const void*> g_active_profile{nullptr};

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static const char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool is_recording(profiler_action a) {
  return a == profiler_action::record || a == profiler_action::record_and_save;
}

}  // namespace

bool cuda_available() noexcept {
  try {
    return detail::cuda_unavailable_reason().empty();
  } catch (...) {
    return false;  // out of memory while probing: report no GPU rather than terminate
  }
}

struct profile::impl {
  profile_options options;
  bool want_cpu = true;
  bool want_cuda = false;
  bool running = false;
  bool tracing = false;  // between start_trace and stop_trace
  bool cuda_tracing = false;  // CUPTI records the current window
  std::int64_t step_num = 0;
  profiler_action action = profiler_action::none;
  detail::window_bounds window;
  std::unique_ptr<record_function> step_marker;
  bool has_window = false;
  trace_data last;
  trace_data accumulated;
  std::vector<std::pair<std::string, std::string>> metadata;

  profiler_action next_action(std::int64_t step) const {
    return options.schedule ? options.schedule(step) : profiler_action::record;
  }

  void prepare_trace() { detail::clock_anchor(); }

  void start_trace() {
    detail::drain_all(nullptr);  // discard entries that straggled in after the last window
    // Before the window opens: enabling CUPTI can take long the first time.
    cuda_tracing = want_cuda && detail::cuda_start(options.profile_memory);
    window.start_tick = detail::now_ticks();
    std::uint32_t flags = 0;
    if (want_cpu) {
      flags |= detail::flag_cpu;
      if (options.record_shapes || options.with_flops) flags |= detail::flag_shapes;
      if (options.profile_memory) flags |= detail::flag_memory;
      if (options.with_flops) flags |= detail::flag_flops;
      if (options.with_stack) flags |= detail::flag_stack;
      if (options.with_modules) flags |= detail::flag_modules;
    }
    detail::g_flags.store(flags, std::memory_order_seq_cst);
    tracing = true;
  }

  void stop_trace() {
    if (!tracing) return;
    // PyTorch synchronises the device before the window ends, so queued kernels are in it.
    if (cuda_tracing) detail::cuda_synchronize();
    detail::g_flags.store(0, std::memory_order_seq_cst);
    window.end_tick = detail::now_ticks();
    tracing = false;
    const detail::tick_converter clock = detail::clock_calibrate();
    trace_data data = detail::collect_window(window, clock, options.with_flops);
    if (cuda_tracing) detail::cuda_stop(data, window, clock);
    data.record_shapes = options.record_shapes || options.with_flops;
    data.profile_memory = options.profile_memory;
    data.with_stack = options.with_stack;
    data.with_flops = options.with_flops;
    data.with_modules = options.with_modules;
    data.cuda_enabled = cuda_tracing;
    cuda_tracing = false;
    data.distributed = options.distributed;
    data.metadata = metadata;
    if (options.acc_events) detail::append_window(accumulated, data);
    last = std::move(data);
    has_window = true;
  }

  void open_step_marker() {
    if (options.schedule)
      // `new` rather than make_unique: with_stack drops the innermost kinetoscope frames, and a
      // std::make_unique frame between them and the user's step() call would stay.
      step_marker.reset(new record_function("ProfilerStep#" + std::to_string(step_num)));
  }
  void close_step_marker() { step_marker.reset(); }

  void ready(profile& self) {
    if (!options.on_trace_ready) return;
    try {
      options.on_trace_ready(self);
    } catch (const std::exception& e) {
      detail::log(log_level::error, std::string("on_trace_ready failed: ") + e.what() +
                                        " (the window stays available through last_trace() and "
                                        "export_chrome_trace(); profiling continues)");
    } catch (...) {
      detail::log(log_level::error,
                  "on_trace_ready failed with a non-standard exception (the window stays "
                  "available; profiling continues)");
    }
  }

  // The transition table of torch.profiler (profiler-rules.md#schedule). `exit` = stop().
  void transition(profile& self, profiler_action prev, profiler_action cur, bool exit) {
    using A = profiler_action;
    if (exit) {
      switch (prev) {
        case A::none: return;
        // PyTorch starts and stops an (empty) trace here; we skip that so that the last
        // completed window is not replaced by an empty one (nothing recorded is lost).
        case A::warmup: return;
        case A::record:
        case A::record_and_save: stop_trace(); ready(self); return;
      }
      return;
    }
    switch (prev) {
      case A::none:
        if (cur == A::warmup) prepare_trace();
        if (is_recording(cur)) { prepare_trace(); start_trace(); }
        return;
      case A::warmup:
        if (cur == A::none) {
          // As above: PyTorch's start+stop here would only produce an empty window.
          detail::log(log_level::warning, "Incorrect schedule: WARMUP followed by NONE");
        } else if (is_recording(cur)) {
          start_trace();
        }
        return;
      case A::record:
        if (cur == A::none || cur == A::warmup) {
          detail::log(log_level::warning, std::string("Incorrect schedule: RECORD followed by ") +
                                              to_string(cur));
          stop_trace();
        }
        return;
      case A::record_and_save:
        stop_trace();
        ready(self);
        if (cur != A::none) prepare_trace();
        if (is_recording(cur)) start_trace();
        return;
    }
  }
};

profile::profile(profile_options options) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
  bool cpu = impl_->options.activities.empty();
  bool cuda = impl_->options.activities.empty() && cuda_available();
  bool cuda_warned = false;  // one message even if cuda is listed twice
  for (activity a : impl_->options.activities) {
    if (a == activity::cpu) cpu = true;
    if (a == activity::cuda) {
      if (cuda_available()) {
        cuda = true;
      } else if (!cuda_warned) {
        detail::log(log_level::warning, "activity cuda: " + detail::cuda_unavailable_reason() +
                                            "; recording CPU activity only");
        cuda_warned = true;
      }
    }
  }
  impl_->want_cpu = cpu;
  impl_->want_cuda = cuda;
}

profile::~profile() {
  if (impl_ && impl_->running) {
    try {
      stop();
    } catch (...) {
      // a destructor never throws; stop() already reported what failed
    }
  }
}

void profile::start() {
  impl& s = *impl_;
  if (s.running) {
    detail::log(log_level::warning, "profile.start() called while already running: ignored");
    return;
  }
  const void* expected = nullptr;
  if (!g_active_profile.compare_exchange_strong(expected, this)) {
    detail::log(log_level::error,
                "profile.start(): another profile is already recording in this process: ignored");
    return;
  }
  s.running = true;
  s.step_num = 0;
  s.action = s.next_action(0);
  s.transition(*this, profiler_action::none, s.action, false);
  s.open_step_marker();
}

void profile::step() {
  impl& s = *impl_;
  if (!s.running) {
    detail::log(log_level::warning, "profile.step() called before start(): ignored");
    return;
  }
  s.close_step_marker();
  const profiler_action prev = s.action;
  s.step_num += 1;
  s.action = s.next_action(s.step_num);
  s.transition(*this, prev, s.action, false);
  s.open_step_marker();
}

void profile::stop() {
  impl& s = *impl_;
  if (!s.running) {
    detail::log(log_level::warning, "profile.stop() called while not running: ignored");
    return;
  }
  s.close_step_marker();
  s.transition(*this, s.action, s.action, true);
  s.running = false;
  if (s.tracing) s.stop_trace();  // defensive: never leave the recorder on
  g_active_profile.store(nullptr);
}

std::int64_t profile::step_num() const noexcept { return impl_->step_num; }
profiler_action profile::current_action() const noexcept { return impl_->action; }
bool profile::running() const noexcept { return impl_->running; }
const profile_options& profile::options() const noexcept { return impl_->options; }
bool profile::cuda_active() const noexcept { return impl_->want_cuda; }

const trace_data& profile::last_trace() const {
  if (!impl_->has_window) throw std::logic_error("Profiler didn't finish running: no window has completed yet");
  return impl_->last;
}

event_list profile::events() const {
  const trace_data& data = impl_->options.acc_events && impl_->has_window ? impl_->accumulated : last_trace();
  return build_events(data);
}

averages profile::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  return kinetoscope::key_averages(events(), group_by_input_shape, group_by_stack_n);
}

void profile::add_metadata(std::string key, std::string_view value) {
  impl_->metadata.emplace_back(std::move(key), json_quote(value));
}

void profile::add_metadata_json(std::string key, std::string json_text) {
  impl_->metadata.emplace_back(std::move(key), std::move(json_text));
}

}  // namespace kinetoscope
