// SPDX-License-Identifier: BSD-3-Clause
// Built with KINETOSCOPE_DISABLE and linked with no kinetoscope library at all: every piece of
// instrumentation (ranges, operators and their arguments, module scopes, thread names) must
// compile to empty inline code that references nothing the library defines, or this program
// does not link.
#include <kinetoscope/kinetoscope.hpp>

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#ifndef KINETOSCOPE_DISABLE
#error "build this file with -DKINETOSCOPE_DISABLE"
#endif

static_assert(std::is_empty_v<kinetoscope::record_function>);
static_assert(std::is_empty_v<kinetoscope::record_op>);
static_assert(std::is_empty_v<kinetoscope::module_scope>);
static_assert(std::is_empty_v<kinetoscope::arg>);

int main() {
  const std::string dynamic = "dynamic_range";
  double sum = 0;
  for (int i = 0; i < 3; ++i) {
    KINETOSCOPE_RANGE("static_range");
    kinetoscope::record_function r(dynamic);
    kinetoscope::record_op op("aten::mm", {kinetoscope::arg::tensor({4, 4}), kinetoscope::arg::scalar(1.0),
                                           kinetoscope::arg::int_list({1, 1}), kinetoscope::arg::boolean(true),
                                           kinetoscope::arg::none()}, kinetoscope::op_links{7, 0});
    const std::vector<kinetoscope::arg> inputs{kinetoscope::arg::scalar(std::int64_t{2})};
    kinetoscope::record_op op2(dynamic, inputs);
    kinetoscope::module_scope m("layer1", "Conv2d", 10);
    kinetoscope::module_scope m2(dynamic, "Linear");
    kinetoscope::set_thread_name("worker");
    sum += static_cast<double>(r.id() + op.id() + m.id() + m2.id());
    op.end();
    r.end();
  }
  std::printf("disabled instrumentation ran, ids sum %g (0 expected)\n", sum);
  return sum == 0 ? 0 : 1;
}
