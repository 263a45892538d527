// SPDX-License-Identifier: BSD-3-Clause
// The shared text formats (writer/formats): the one JSON string escaper, as json_out streams it
// and as the timeline's writer appends it, and Python's number formatting.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "json_out.hpp"
#include "kinetoscope/formats/json_text.hpp"
#include "kinetoscope/formats/py_number.hpp"

namespace fm = kinetoscope::formats;
using kinetoscope::detail::quote_json;

namespace {

const std::string fffd = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

}  // namespace

TEST_CASE("json_text: quotes, backslash, control characters and DEL are escaped") {
  CHECK(fm::json_string("a\"b\\c") == R"("a\"b\\c")");
  CHECK(fm::json_string("\b\f\n\r\t") == R"("\b\f\n\r\t")");
  CHECK(fm::json_string(std::string_view("\0\x01\x1f", 3)) == R"("\u0000\u0001\u001f")");
  CHECK(fm::json_string("\x7f") == R"("\u007f")");
  CHECK(fm::json_string("/") == "\"/\"");  // never escaped
  CHECK(fm::json_string("") == "\"\"");
}

TEST_CASE("json_text: U+2028, U+2029 and other valid UTF-8 pass unchanged") {
  const std::string text = "a\xE2\x80\xA8" "b\xE2\x80\xA9" "c \xC2\xB5 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";
  CHECK(fm::json_string(text) == "\"" + text + "\"");
  CHECK(nlohmann::json::parse(fm::json_string(text)).get<std::string>() == text);
}

TEST_CASE("json_text: invalid UTF-8 becomes U+FFFD, one per maximal ill-formed subpart") {
  CHECK(fm::json_string("a\xFF" "b") == "\"a" + fffd + "b\"");
  CHECK(fm::json_string("\x80") == "\"" + fffd + "\"");                              // continuation
  CHECK(fm::json_string("\xC0\xAF") == "\"" + fffd + fffd + "\"");                   // overlong
  CHECK(fm::json_string("\xE2\x82") == "\"" + fffd + "\"");                          // truncated
  CHECK(fm::json_string("\xE2\x82x") == "\"" + fffd + "x\"");                        // cut short
  CHECK(fm::json_string("\xED\xA0\x80") == "\"" + fffd + fffd + fffd + "\"");        // surrogate
  CHECK(fm::json_string("\xF4\x90\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\"");
  CHECK(fm::json_string("\xFF\xC3(") == "\"" + fffd + fffd + "(\"");
}

TEST_CASE("json_text: name mode as Kineto writes names") {
  CHECK(fm::json_string("C:\\a\\b", fm::string_mode::name) == "\"C:/a/b\"");
  CHECK(fm::json_string("x\r\ny\t", fm::string_mode::name) == R"("xy\t")");
}

TEST_CASE("json_text: the appending form equals json_out's streaming form on any bytes") {
  std::mt19937 rng(2028);
  for (int round = 0; round < 500; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 300);
    for (int k = 0; k < n; ++k) s += static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 26);
    for (auto mode : {fm::string_mode::text, fm::string_mode::name}) {
      const std::string appended = fm::json_string(s, mode);
      CHECK(appended == quote_json(s, mode));
      CHECK(fm::is_valid_json(appended));
      CHECK(nlohmann::json::accept(appended));
    }
    std::string out = "[";
    fm::append_json_string(out, s);
    out += ']';
    CHECK(fm::is_valid_json(out));
  }
}

TEST_CASE("json_text: the validator") {
  CHECK(fm::is_valid_json(R"({"a":[1,2.5e-3,true,null,"x\u00e9"]})"));
  CHECK(fm::is_valid_json(" [] "));
  CHECK_FALSE(fm::is_valid_json("[1,]"));
  CHECK_FALSE(fm::is_valid_json("\"\xFF\""));
  CHECK_FALSE(fm::is_valid_json(R"("\udc00")"));
  CHECK_FALSE(fm::is_valid_json("NaN"));
  CHECK_FALSE(fm::is_valid_json(std::string(600, '[') + std::string(600, ']')));
}

TEST_CASE("py_number: round is Python's on the binary value") {
  CHECK(fm::py_round(2.5) == 2.0);
  CHECK(fm::py_round(3.5) == 4.0);
  CHECK(fm::py_round(2.675, 2) == 2.67);  // 2.67499999… in binary
  CHECK(fm::py_round(0.125, 2) == 0.12);  // exact tie -> even
  CHECK(fm::py_round(1.005, 2) == 1.0);
  CHECK(fm::py_round(7.0, 0) == 7.0);
  CHECK(std::signbit(fm::py_round(-0.001, 2)));
  CHECK(fm::py_round(3.7e-20, 20) == 4e-20);  // digits beyond 17 still round
  CHECK(fm::py_round(1.5, 400) == 1.5);
  CHECK(std::isnan(fm::py_round(std::nan(""), 2)));
  CHECK(std::isinf(fm::py_round(std::numeric_limits<double>::infinity(), 2)));
}

TEST_CASE("py_number: repr is Python's") {
  CHECK(fm::py_float_repr(0.0) == "0.0");
  CHECK(fm::py_float_repr(-0.0) == "-0.0");
  CHECK(fm::py_float_repr(2.67) == "2.67");
  CHECK(fm::py_float_repr(100.0) == "100.0");
  CHECK(fm::py_float_repr(100000.0) == "100000.0");
  CHECK(fm::py_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(fm::py_float_repr(1e16) == "1e+16");
  CHECK(fm::py_float_repr(1.5e16) == "1.5e+16");
  CHECK(fm::py_float_repr(9999999999999998.0) == "9999999999999998.0");
  CHECK(fm::py_float_repr(1e-05) == "1e-05");
  CHECK(fm::py_float_repr(0.0001) == "0.0001");
  CHECK(fm::py_float_repr(1e300) == "1e+300");
  CHECK(fm::py_float_repr(-2.5e-310) == "-2.5e-310");
  CHECK(fm::py_float_repr(std::nan("")) == "nan");
  CHECK(fm::py_float_repr(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(fm::py_float_repr(-std::numeric_limits<double>::infinity()) == "-inf");
}

TEST_CASE("py_number: f\"{x:g}\" is Python's") {
  CHECK(fm::py_format_g(0.0) == "0");
  CHECK(fm::py_format_g(12.5) == "12.5");
  CHECK(fm::py_format_g(123456789.0) == "1.23457e+08");
  CHECK(fm::py_format_g(1e-05) == "1e-05");
  CHECK(fm::py_format_g(-std::nan("")) == "nan");
  CHECK(fm::py_format_g(-std::numeric_limits<double>::infinity()) == "-inf");
}
