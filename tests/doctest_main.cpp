// SPDX-License-Identifier: BSD-3-Clause
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
