// SPDX-License-Identifier: BSD-3-Clause
// Placeholder.
#include <doctest/doctest.h>
