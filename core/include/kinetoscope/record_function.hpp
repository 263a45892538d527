// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file record_function.hpp
/// User ranges (torch.profiler.record_function) and operators (PyTorch's cpu_op events).
///
/// Fast path: `KINETOSCOPE_RANGE("name")` declares a scoped range whose name is a pointer to a
/// static string literal. With no profile recording it costs one relaxed atomic load and a
/// branch; while recording, two TSC reads and a 40-byte append to a thread-local buffer.
/// Dynamic names (`record_function{std::string}`) copy the name and cost a little more.

#include <cstdint>
#include <concepts>
#include <initializer_list>
#include <span>
#include <string_view>
#include <type_traits>

#include "kinetoscope/detail/recorder.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// A name known at compile time: only string literals (arrays of char) convert to it, so the
/// recorder can keep the pointer and intern the text later.
struct static_name {
  const char* str;
  template <std::size_t N>
  consteval static_name(const char (&s)[N]) noexcept : str(s) {}  // NOLINT: implicit by design
};

/// A run-time name (std::string, std::string_view, const char*): copied when the range begins.
/// Arrays (string literals) are excluded so that literals pick the static_name overloads.
template <class S>
concept dynamic_name =
    std::convertible_to<const S&, std::string_view> && !std::is_array_v<S>;

/// Extra links of an operator: autograd sequence number and forward thread (backward nodes).
struct op_links {
  std::int64_t sequence_nr = -1;    ///< -1: none
  std::int64_t fwd_thread_id = 0;   ///< 0 for forward ops; >= 1 for backward nodes
};

#if defined(KINETOSCOPE_DISABLE)

// KINETOSCOPE_DISABLE (define it for the whole program, like Tracy's TRACY_ENABLE switch):
// the instrumentation below compiles to nothing. Ranges, operators, their arguments and thread
// names become empty inline classes and functions that reference no symbol of the library, so
// a program that only instruments links nothing of kinetoscope. They live in an inline
// namespace, so a translation unit built with the switch and one built without it name
// different classes and can share a program without breaking the one-definition rule. The
// control API (profile, schedule, memory reports) is unaffected.
inline namespace disabled {

class record_function {
 public:
  explicit record_function(static_name) noexcept {}
  template <dynamic_name S>
  explicit record_function(const S&) noexcept {}
  record_function(const record_function&) = delete;
  record_function& operator=(const record_function&) = delete;
  void end() noexcept {}
  std::int64_t id() const noexcept { return 0; }

 protected:
  record_function() noexcept = default;
};

class arg {
 public:
  static constexpr std::size_t max_dims = 8;
  static arg tensor(std::initializer_list<std::int64_t>, const char* = "float") noexcept { return {}; }
  static arg tensor(std::span<const std::int64_t>, const char* = "float",
                    std::span<const std::int64_t> = {}) noexcept { return {}; }
  static arg scalar(std::int64_t) noexcept { return {}; }
  static arg scalar(double) noexcept { return {}; }
  static arg boolean(bool) noexcept { return {}; }
  static arg int_list(std::initializer_list<std::int64_t>) noexcept { return {}; }
  static arg none() noexcept { return {}; }
};

class record_op : public record_function {
 public:
  explicit record_op(static_name, std::initializer_list<arg> = {}, op_links = {}) noexcept {}
  template <dynamic_name S>
  explicit record_op(const S&, std::initializer_list<arg> = {}, op_links = {}) noexcept {}
  template <dynamic_name S>
  record_op(const S&, std::span<const arg>, op_links = {}) noexcept {}
  record_op(static_name, std::span<const arg>, op_links = {}) noexcept {}
};

inline void set_thread_name(std::string_view) noexcept {}

}  // inline namespace disabled

/// The OS thread id of the calling thread (as written in "tid").
std::int64_t current_thread_id() noexcept;

#else  // KINETOSCOPE_DISABLE

/**
 * A scoped `user_annotation` range, like `with torch.profiler.record_function(name):`.
 * Ranges nest; self time excludes nested ranges and ops. Free when no profile is recording.
 *
 * **Example**:
 * @code
 * { kinetoscope::record_function r("forward"); model.forward(x); }
 * { KINETOSCOPE_RANGE("backward"); model.backward(); }     // static name: fastest
 * @endcode
 */
class record_function {
 public:
  explicit record_function(static_name name) noexcept { begin_static(name.str, user_annotation_); }
  template <dynamic_name S>
  explicit record_function(const S& name) {
    begin_dynamic(std::string_view(name), user_annotation_);
  }
  record_function(const record_function&) = delete;
  record_function& operator=(const record_function&) = delete;
  ~record_function() {
    if (buffer_ != nullptr) end();
  }

  /// Ends the range now (idempotent). May be called from another thread than the one that
  /// began the range: the range is then recorded as async (PyTorch's
  /// `_call_end_callbacks_on_future`).
  void end() noexcept {
    if (buffer_ == nullptr) return;
    const std::uint64_t t = detail::now_ticks();
    auto* b = buffer_;
    buffer_ = nullptr;
    if (dyn_name_ == nullptr && sequence_nr_ < 0 && detail::t_buffer == b) [[likely]] {
      b->current_external_id = parent_id_;
      detail::push_static_range(b, category_, name_, start_, t, id_);
    } else {
      end_slow(b, t);
    }
  }

  /// The "External id" of this range, 0 when not recording.
  std::int64_t id() const noexcept { return buffer_ ? id_ : 0; }

 protected:
  static constexpr std::uint8_t user_annotation_ = static_cast<std::uint8_t>(cpu_category::user_annotation);
  static constexpr std::uint8_t cpu_op_ = static_cast<std::uint8_t>(cpu_category::cpu_op);

  record_function() noexcept = default;
  // The disabled path stores `buffer_` only: every other member is written by begin_active(),
  // which is why they have no default initialisers (each store costs on the 1 ns budget).
  void begin_static(const char* name, std::uint8_t category) noexcept {
    const std::uint32_t flags = detail::g_flags.load(std::memory_order_relaxed);
    if ((flags & detail::flag_cpu) == 0) [[likely]] return;
    begin_active(flags, name, category, nullptr, 0);
  }
  /// `flags` is the g_flags word the caller loaded (one load decides everything).
  void begin_active(std::uint32_t flags, const char* name, std::uint8_t category, char* dyn_name,
                    std::uint32_t dyn_len) noexcept {
    auto* b = detail::buffer();
    name_ = name;
    dyn_name_ = dyn_name;
    dyn_len_ = dyn_len;
    category_ = category;
    sequence_nr_ = -1;
    fwd_thread_id_ = 0;
    id_ = b->next_external_id();
    parent_id_ = b->current_external_id;
    b->current_external_id = id_;
    buffer_ = b;
    // Captured before the start tick so the range's own duration excludes the unwinding.
    if ((flags & detail::flag_stack) != 0) [[unlikely]] detail::push_stack(b, id_);
    start_ = detail::now_ticks();
  }
  void begin_dynamic(std::string_view name, std::uint8_t category);
  void end_slow(detail::thread_buffer* b, std::uint64_t t) noexcept;

  detail::thread_buffer* buffer_ = nullptr;  // non-null while an active range is open
  const char* name_;
  char* dyn_name_;        // inline_name_, a heap copy (freed at end), or nullptr
  std::uint32_t dyn_len_;
  std::uint8_t category_;
  std::uint64_t start_;
  std::int64_t id_;
  std::int64_t parent_id_;
  std::int64_t sequence_nr_;
  std::int64_t fwd_thread_id_;
  char inline_name_[48];  // dynamic names up to 47 bytes avoid a heap allocation
};

/// One operator input as record_shapes sees it. Values are copied when the op begins.
class arg {
 public:
  static constexpr std::size_t max_dims = 8;

  /// A tensor of `sizes` (contiguous strides unless given) and dtype name ("float", "long int").
  static arg tensor(std::initializer_list<std::int64_t> sizes, const char* dtype = "float");
  static arg tensor(std::span<const std::int64_t> sizes, const char* dtype = "float",
                    std::span<const std::int64_t> strides = {});
  static arg scalar(std::int64_t v);
  static arg scalar(double v);
  static arg boolean(bool v);
  /// An int list such as conv2d's stride [1, 1] ("ScalarList" in the trace).
  static arg int_list(std::initializer_list<std::int64_t> values);
  static arg none();

  enum class kind : std::uint8_t { tensor, int_scalar, float_scalar, bool_scalar, int_list, none };
  kind k = kind::none;
  std::uint8_t ndim = 0;
  const char* dtype = "";
  std::int64_t sizes[max_dims] = {};
  std::int64_t strides[max_dims] = {};
  std::int64_t int_value = 0;
  double float_value = 0;
};


/**
 * A scoped operator, written as a `cpu_op` event like PyTorch's aten ops. Inputs are kept only
 * when the profile has record_shapes (or with_flops); FLOPs are computed at collection time from
 * the name and the inputs (docs/profiler-rules.md#flops).
 *
 * **Example**:
 * @code
 * kinetoscope::record_op op("aten::mm", {kinetoscope::arg::tensor({64, 128}),
 *                                        kinetoscope::arg::tensor({128, 256})});
 * @endcode
 */
class record_op : public record_function {
 public:
  explicit record_op(static_name name, std::initializer_list<arg> inputs = {},
                     op_links links = {}) noexcept {
    const std::uint32_t flags = detail::g_flags.load(std::memory_order_relaxed);
    if ((flags & detail::flag_cpu) == 0) [[likely]] return;
    begin_active(flags, name.str, cpu_op_, nullptr, 0);
    finish_begin(std::span<const arg>(inputs.begin(), inputs.size()), links);
  }
  template <dynamic_name S>
  explicit record_op(const S& name, std::initializer_list<arg> inputs = {}, op_links links = {})
      : record_op(std::string_view(name), std::span<const arg>(inputs.begin(), inputs.size()),
                  links, dynamic_tag{}) {}
  template <dynamic_name S>
  record_op(const S& name, std::span<const arg> inputs, op_links links = {})
      : record_op(std::string_view(name), inputs, links, dynamic_tag{}) {}
  /// Static name with inputs held in a container (std::vector<arg>).
  record_op(static_name name, std::span<const arg> inputs, op_links links = {}) noexcept
      : record_op(name, std::initializer_list<arg>{}, links) {
    if (buffer_ != nullptr && !inputs.empty()) finish_begin(inputs, links);
  }

 private:
  struct dynamic_tag {};
  record_op(std::string_view name, std::span<const arg> inputs, op_links links, dynamic_tag);
  void finish_begin(std::span<const arg> inputs, op_links links) noexcept;
};

/// The OS thread id of the calling thread (as written in "tid").
std::int64_t current_thread_id() noexcept;

/// Names the calling thread in traces (`thread <tid> (<name>)`), e.g. "dataloader".
void set_thread_name(std::string_view name);

#endif  // KINETOSCOPE_DISABLE

}  // namespace kinetoscope

#define KINETOSCOPE_CONCAT_IMPL(a, b) a##b
#define KINETOSCOPE_CONCAT(a, b) KINETOSCOPE_CONCAT_IMPL(a, b)
#if defined(KINETOSCOPE_DISABLE)
#define KINETOSCOPE_RANGE(name) static_cast<void>(0)
#else
/// A scoped user range with a static (literal) name: the fastest form.
#define KINETOSCOPE_RANGE(name) \
  ::kinetoscope::record_function KINETOSCOPE_CONCAT(kinetoscope_range_, __LINE__)(name)
#endif
