// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file module_scope.hpp
/// Module scopes: the C++ counterpart of an `nn.Module` forward call, recorded while a profile
/// with `with_modules` records. Traces carry them the way PyTorch's do (python_function slices
/// "nn.Module: <Class>_<k>" linked by "Python id" / "Python parent id" / "Python module id"),
/// so torch-tb-profiler's Module view and kinetoscope's module view build the model tree, and
/// print_model_profile() (module_profile.hpp) prints DeepSpeed's flops-profiler report.
///
/// Cost: with no profile recording modules, one relaxed atomic load and a branch (the same
/// test as KINETOSCOPE_RANGE, on its own flag bit). While recording, one atomic increment for
/// the call id, two TSC reads and one 56-byte queue entry (plus the path bytes for a run-time
/// path). Module scopes are meant for module forward calls (micro- to milliseconds each), not
/// for per-element code.

#include <cstdint>
#include <string_view>

#include "kinetoscope/detail/recorder.hpp"
#include "kinetoscope/record_function.hpp"

namespace kinetoscope {

/**
 * A scoped module call, like the forward of an `nn.Module` under torch.profiler's with_modules /
 * with_stack. `path` is the module's dotted name in the model ("layer1.0.conv1"; "" for the
 * model itself, as `named_modules()` names it), `type` its class name ("Conv2d"), `params` the
 * number of parameters the module owns directly — not those of its sub-modules, which their
 * own scopes report (the module profile sums them, as `module.parameters()` would).
 *
 * Scopes nest per thread: the parent of a scope is the innermost scope open on the same thread.
 * A module instance is identified by (type, path): every call of it gets the same
 * "Python module id" and the same "nn.Module: <type>_<k>" name in every trace of the process,
 * k numbering the instances of each type in the order they were first recorded.
 *
 * A scope is recorded when it begins and ends inside a recorded window of a profile with
 * `with_modules = true` (and the cpu activity); a scope that began while nothing recorded
 * stays unrecorded. It must end on the thread that began it (it cannot be moved or copied).
 *
 * **Example**:
 * @code
 * variable SmallCNN::forward(const tensor& x) {
 *   kinetoscope::module_scope m("", "SmallCNN");
 *   auto y = conv1(x);                                  // conv1 opens ("conv1", "Conv2d", 224)
 *   ...
 * }
 * variable Conv2d::operator()(const tensor& x) {
 *   kinetoscope::module_scope m(name_, "Conv2d", weight.numel() + bias.numel());  // run-time path
 *   ...
 * }
 * @endcode
 */
#if defined(KINETOSCOPE_DISABLE)
// KINETOSCOPE_DISABLE: an empty scope that references nothing of the library (see
// record_function.hpp).
inline namespace disabled {
class module_scope {
 public:
  module_scope(static_name, static_name, std::int64_t = 0) noexcept {}
  template <dynamic_name S>
  module_scope(const S&, static_name, std::int64_t = 0) noexcept {}
  module_scope(const module_scope&) = delete;
  module_scope& operator=(const module_scope&) = delete;
  std::int64_t id() const noexcept { return 0; }
};
}  // inline namespace disabled
#else
class module_scope {
 public:
  module_scope(static_name path, static_name type, std::int64_t params = 0) noexcept {
    if ((detail::g_flags.load(std::memory_order_relaxed) & detail::flag_modules) == 0) [[likely]]
      return;
    begin(path.str, std::string_view(), type.str, params);
  }
  template <dynamic_name S>
  module_scope(const S& path, static_name type, std::int64_t params = 0) {
    if ((detail::g_flags.load(std::memory_order_relaxed) & detail::flag_modules) == 0) [[likely]]
      return;
    begin(nullptr, std::string_view(path), type.str, params);
  }
  module_scope(const module_scope&) = delete;
  module_scope& operator=(const module_scope&) = delete;
  ~module_scope() {
    if (buffer_ != nullptr) end();
  }

  /// The call id written as "Python id" (unique in the process), 0 when not recording.
  std::int64_t id() const noexcept { return buffer_ != nullptr ? call_id_ : 0; }

 private:
  void begin(const char* static_path, std::string_view dynamic_path, const char* type,
             std::int64_t params);
  void end() noexcept;

  // As in record_function, the disabled path stores `buffer_` only; begin() writes the rest.
  detail::thread_buffer* buffer_ = nullptr;  // non-null while a recorded scope is open
  const char* static_path_;
  char* dyn_path_;  // heap copy of a run-time path, or nullptr
  std::uint32_t dyn_len_;
  const char* type_;
  std::int64_t params_;
  std::int64_t call_id_;
  std::int64_t parent_id_;
  std::uint64_t start_;
};

#endif  // KINETOSCOPE_DISABLE

}  // namespace kinetoscope
