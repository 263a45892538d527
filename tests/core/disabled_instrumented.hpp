// SPDX-License-Identifier: BSD-3-Clause
#pragma once

namespace kinetoscope_test {
/// Runs n iterations of ranges, operators and module scopes compiled with KINETOSCOPE_DISABLE;
/// returns the sum of their ids (0: none was recorded).
long run_disabled_instrumentation(int n);
}  // namespace kinetoscope_test
