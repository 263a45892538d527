// SPDX-License-Identifier: BSD-3-Clause
// Compiled with KINETOSCOPE_DISABLE into test_core (tests/meson.build), beside translation units
// built without it: test_record_function.cpp checks that nothing here is recorded while a
// profile records, and that both kinds of TU share one program (the inline namespace).
#include "disabled_instrumented.hpp"

#include <kinetoscope/kinetoscope.hpp>

#include <string>

#ifndef KINETOSCOPE_DISABLE
#error "build this file with -DKINETOSCOPE_DISABLE"
#endif

namespace kinetoscope_test {

long run_disabled_instrumentation(int n) {
  long ids = 0;
  const std::string dynamic = "disabled_dynamic";
  for (int i = 0; i < n; ++i) {
    KINETOSCOPE_RANGE("disabled_static");
    kinetoscope::record_function r(dynamic);
    kinetoscope::record_op op("disabled_op", {kinetoscope::arg::tensor({2, 2})});
    kinetoscope::module_scope m("disabled_module", "Linear", 4);
    ids += r.id() + op.id() + m.id();
  }
  return ids;
}

}  // namespace kinetoscope_test
