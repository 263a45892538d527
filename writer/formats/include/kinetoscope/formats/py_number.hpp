// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file py_number.hpp
/// Python 3's number formatting on binary doubles, so that displayed numbers equal the Python
/// tools' (torch-tb-profiler's views, DeepSpeed's flops-profiler report;
/// docs/plugin-rules.md#number-formatting). The one implementation
/// of each for core, the analysis engine and the server; header-only and dependency-free
/// (ARCHITECTURE.md, "Layers").
///
/// * `py_round(x)`: nearest integer, ties to even (`round(2.5) == 2`, `round(3.5) == 4`).
/// * `py_round(x, n)`: the decimal with `n` fraction digits nearest to the **exact binary value**
///   of `x`, ties to even, read back as a double (`round(2.675, 2) == 2.67` because 2.675 is
///   stored as 2.67499999…; `round(0.125, 2) == 0.12` is an exact tie). glibc's `%.*f` rounds
///   the exact binary value in the current rounding mode (round-to-nearest-even by default),
///   which is what CPython's `round` does through `_Py_dg_dtoa` mode 3. A "shortest repr then
///   round" emulation would get 2.675 wrong.
/// * `py_float_repr(x)`: Python's `repr(x)` / `str(x)` of a float.
/// * `py_format_g(x)`: Python's `f"{x:g}"`.

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kinetoscope::formats {

/// Python `round(x)` as a double (NaN and infinities are returned unchanged).
inline double py_round(double x) noexcept {
  if (!std::isfinite(x)) return x;
  // nearbyint uses the current rounding mode; the default FE_TONEAREST is ties-to-even.
  const double r = std::nearbyint(x);
  return r == 0 ? 0.0 * x : r;  // keeps the sign of zero (-0.4 -> -0.0)
}

/// Python `round(x, n)`. As CPython: `n` above 323 returns `x` (every double is already that
/// precise), `n` below -308 returns a zero of x's sign. For negative `n` the value is rounded
/// as round(x / 10^-n) * 10^-n (the division may be inexact; no caller rounds to tens).
inline double py_round(double x, int n) noexcept {
  if (!std::isfinite(x) || n > 323) return x;
  if (n < -308) return 0.0 * x;
  if (n <= 0) {
    if (n == 0) return py_round(x);
    const double p = std::pow(10.0, -n);
    return py_round(x / p) * p;
  }
  // Up to 309 integer digits, the point, up to 323 decimals, a sign and the terminator.
  char buf[640];
  std::snprintf(buf, sizeof buf, "%.*f", n, x);
  return std::strtod(buf, nullptr);
}

/// Python `repr(x)` / `str(x)` of a float: the shortest text that reads back as `x`, with ".0"
/// for integral values ("55.51", "0.0", "-0.0", "0.5750000000000001"); exponent form outside
/// [1e-4, 1e16) as Python writes it ("1e-05", "1.5e+16"); "nan", "inf", "-inf".
inline std::string py_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  const double a = std::fabs(x);
  char buf[64];
  if (a != 0 && (a < 1e-4 || a >= 1e16)) {
    auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    // Python's exponent: a sign and at least two digits ("1e-05", "1e+16", "1e+300").
    const auto e = s.find('e');
    std::string mant = s.substr(0, e);
    std::string exp = s.substr(e + 1);
    const char sign = exp[0] == '-' ? '-' : '+';
    if (exp[0] == '-' || exp[0] == '+') exp.erase(0, 1);
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    if (exp.size() < 2) exp.insert(0, "0");
    return mant + "e" + sign + exp;
  }
  // In fixed notation the shortest round-trip text has the fewest significant digits, so
  // to_chars' shortest fixed form has Python's digits.
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed);
  std::string s(buf, r.ptr);
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

/// Python `f"{x:g}"` (6 significant digits, trailing zeros removed, exponent form below 1e-4
/// and from 1e6): C's "%g", except that every NaN prints as "nan" (C writes "-nan" for a NaN
/// with the sign bit set).
inline std::string py_format_g(double x) {
  if (std::isnan(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace kinetoscope::formats
