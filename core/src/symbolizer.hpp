// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file symbolizer.hpp
/// Return addresses of the running process to source frames (with_stack), through libdw's
/// dwfl: function, file and line, inlined calls expanded, names demangled. Used once per window
/// at collection time, never on the recording path.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kinetoscope::detail {

/// One source frame as written in "Call stack" and shown in Source Location.
struct source_frame {
  std::string text;         ///< "<file>(<line>): <function>", or a fallback (see symbolizer)
  bool own = false;         ///< a frame of kinetoscope's recording machinery (namespace kinetoscope)
  bool entry = false;       ///< process or thread entry code (_start, __libc_start_main, start_thread, clone)
};

/// "<file>(<line>): <function>", PyTorch's frame text.
std::string frame_text(std::string_view file, int line, std::string_view function);

/// A demangled C++ name without its parameter list and trailing qualifiers:
/// "ns::f(int, char const*) const" -> "ns::f"; "f()::{lambda(int)#1}::operator()(int) const"
/// -> "f()::{lambda(int)#1}::operator()". Names without a parameter list are returned unchanged.
std::string strip_parameters(std::string_view demangled);

/// `symbol` demangled (abi::__cxa_demangle) and stripped of its parameters; a name that is not
/// a mangled C++ name (C functions, main) is returned as is.
std::string function_name(const char* symbol);

/// The path as frames show it: lexically normalised ("build/../src/a.cpp" -> "src/a.cpp"),
/// relative to `cwd` when it lies below it (as Python shows a script run from its directory),
/// else absolute or as given.
std::string display_path(std::string_view path, std::string_view cwd);

/**
 * The process's symbolizer: resolves each distinct return address once and keeps the result
 * for the life of the process (addresses of loaded code do not change meaning while the module
 * stays loaded), so later windows only pay for new addresses. Thread-safe.
 */
class symbolizer {
 public:
  symbolizer();
  ~symbolizer();
  symbolizer(const symbolizer&) = delete;
  symbolizer& operator=(const symbolizer&) = delete;

  /// The frames of the call at return address `pc`, innermost first: one per inlined call plus
  /// the enclosing function. Never empty. The reference stays valid for the symbolizer's life.
  const std::vector<source_frame>& frames(std::uintptr_t pc);

  /// The one instance of the process.
  static symbolizer& instance();

 private:
  struct session;
  std::vector<source_frame> resolve(std::uintptr_t pc);

  std::mutex mutex_;
  session* session_ = nullptr;  // libdw state, created on first use, rebuilt for unknown modules
  std::string cwd_;
  std::unordered_map<std::uintptr_t, std::vector<source_frame>> cache_;
};

}  // namespace kinetoscope::detail
