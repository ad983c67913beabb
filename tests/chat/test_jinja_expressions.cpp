// Expressions of the chat-template interpreter: operators with Python semantics, Undefined,
// attribute/item access, slicing, string methods, filters, tests and transformers' tojson.
#include <gtest/gtest.h>

#include "chat/jinja_test_helpers.h"

namespace jet::jinja::testing {
namespace {

TEST(JinjaExpressions, ArithmeticFollowsPython) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 - 4 / 2 }}"), "5.0");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7.5 % 2 }}"), "3 -4 2 -2 0.5");
  EXPECT_EQ(render("{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"), "1024 0.5 64 4");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ true + 1 }} {{ 1 + 1.5 }}"), "ababab [1, 1] 2 2.5");
  EXPECT_EQ(render("{{ 1e20 }} {{ 1e-5 }} {{ 1_000 }}"), "1e+20 1e-05 1000");
}

TEST(JinjaExpressions, ArithmeticErrorsNameThePosition) {
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "chat template line 1, column 6: division by zero");
  EXPECT_EQ(error_of("ab\n  {{ 'a' + 1 }}"),
            "chat template line 2, column 10: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "chat template line 1, column 24: integer overflow");
}

TEST(JinjaExpressions, ConcatenationAndPrintingUsePythonStr) {
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true ~ 2.0 ~ [1, 'x'] ~ {'k': none} }}"), "a1NoneTrue2.0[1, 'x']{'k': None}");
  EXPECT_EQ(render("{{ m }}", R"({"m": {"b": [1, 2.5], "a": "q'"}})"), "{'b': [1, 2.5], 'a': \"q'\"}");
}

TEST(JinjaExpressions, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}"),
            "True True True True False");
  EXPECT_EQ(render("{{ 'at' in 'cat' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'a' in nothing }}"),
            "True True True False");
  EXPECT_EQ(render("{{ true and 'x' }} {{ 0 or 'y' }} {{ not [] }} {{ 'a' if 0 else 'b' }}"), "x y True b");
  // The right operand is not evaluated when the left decides (it would raise here).
  EXPECT_EQ(render("{{ false and nothing.x }} {{ true or nothing.x }}"), "False True");
  EXPECT_EQ(error_of("{{ 'a' < 1 }}"),
            "chat template line 1, column 4: '<' not supported between instances of 'str' and 'int'");
}

TEST(JinjaExpressions, UndefinedBehavesLikeJinjasDefault) {
  EXPECT_EQ(render("[{{ nothing }}] {{ nothing is defined }} {{ nothing | length }} {{ nothing == nothing }}"),
            "[] False 0 True");
  EXPECT_EQ(render("{% for x in nothing %}x{% endfor %}{% if not nothing %}falsy{% endif %}{{ nothing ~ 'ok' }}"),
            "falsyok");
  EXPECT_EQ(render("{{ m.absent is defined }} [{{ m.absent }}]", R"({"m": {}})"), "False []");
  EXPECT_EQ(error_of("{{ nothing.attr }}"), "chat template line 1, column 11: 'nothing' is undefined");
  EXPECT_EQ(error_of("{{ nothing + 1 }}"), "chat template line 1, column 12: 'nothing' is undefined");
  EXPECT_EQ(error_of("{{ m.a.b }}", R"({"m": {}})"),
            "chat template line 1, column 7: 'dict object' has no attribute 'a'");
}

TEST(JinjaExpressions, AttributesItemsAndSlices) {
  const std::string message = R"({"m": {"role": "user", "content": "héllo 🌍", "items": 7}, "xs": [1, 2, 3, 4]})";
  EXPECT_EQ(
      render("{{ m.role }} {{ m['content'] }} {{ m['items'] }} {{ m.get('role') }} {{ m.get('x', 'd') }}", message),
      "user héllo 🌍 7 user d");
  EXPECT_EQ(
      render("{{ xs[0] }} {{ xs[-1] }} [{{ xs[9] }}] {{ xs.1 }} {{ xs[1:3] }} {{ xs[::-1] }} {{ xs[::2] }}", message),
      "1 4 [] 2 [2, 3] [4, 3, 2, 1] [1, 3]");
  EXPECT_EQ(render("{{ m.content[::-1] }} {{ m.content[-1] }} {{ m.content[1:4] }}", message), "🌍 olléh 🌍 éll");
  EXPECT_EQ(error_of("{{ xs[::0] }}", message), "chat template line 1, column 6: slice step cannot be zero");
}

TEST(JinjaExpressions, StringMethods) {
  const std::string vars = R"({"s": "<think>\nplan\n</think>\n\nanswer"})";
  EXPECT_EQ(
      render("{{ s.split('</think>')[-1].lstrip('\\n') }}|{{ s.split('</think>')[0].split('<think>')[-1].strip() }}",
             vars),
      "answer|plan");
  EXPECT_EQ(
      render("{{ s.startswith('<think>') }} {{ s.endswith(('x', 'answer')) }} {{ 'aXb'.upper() }} {{ 'AxB'.lower() }}",
             vars),
      "True True AXB axb");
  EXPECT_EQ(render("{{ 'a-b-c'.replace('-', '+', 1) }} {{ ' a  b '.split() }} {{ ', '.join(['x', 'y']) }}"),
            "a+b-c ['a', 'b'] x, y");
  EXPECT_EQ(error_of("{{ 'a'.split('') }}"), "chat template line 1, column 13: split(): empty separator");
  EXPECT_EQ(error_of("{{ 'a'.nosuch() }}"), "chat template line 1, column 14: 'str object' has no attribute 'nosuch'");
}

TEST(JinjaExpressions, Filters) {
  EXPECT_EQ(
      render("[{{ '  x \\n' | trim }}] {{ 'Hi' | upper }}{{ 'Hi' | lower }} {{ 'héllo' | length }} {{ 42 | string }}"),
      "[x] HIhi 5 42");
  EXPECT_EQ(
      render("{{ none | default('d') }} {{ nothing | default('d') }} {{ '' | default('e', true) }} {{ 0 | d(5) }}"),
      "None d e 0");
  EXPECT_EQ(render("{{ [3, 1] | first }} {{ [3, 1] | last }} {{ 'ab' | list }} {{ [1, 'a', none] | join(',') }}"),
            "3 1 ['a', 'b'] 1,a,None");
  EXPECT_EQ(
      render("{{ 'a-b' | replace('-', '+') }} {{ [1, 2, 3] | reverse | list }} {{ '4.7' | int }} {{ 'x' | float }}"),
      "a+b [3, 2, 1] 4 0.0");
  const std::string messages = R"({"ms": [{"role": "user"}, {"role": "system"}, {"role": "user"}]})";
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | list | length }} "
                   "{{ ms | rejectattr('role', 'eq', 'user') | map(attribute='role') | join }}",
                   messages),
            "2 system");
  EXPECT_EQ(error_of("{{ 1 | nosuch }}"), "chat template line 1, column 8: syntax error: no filter named 'nosuch'");
}

TEST(JinjaExpressions, TojsonIsPythonJsonDumpsWithoutAsciiEscaping) {
  const std::string vars = R"({"x": {"b": [1, 2.5, null, true, "é\"\n\u0001\u007f"], "a": {}, "c": 1e-7}})";
  EXPECT_EQ(render("{{ x | tojson }}", vars), R"({"b": [1, 2.5, null, true, "é\"\n\u0001)"
                                              "\x7f"
                                              R"("], "a": {}, "c": 1e-07})");
  EXPECT_EQ(render("{{ x.b[:2] | tojson(indent=2) }}", vars), "[\n  1,\n  2.5\n]");
  EXPECT_EQ(render("{{ x | tojson(sort_keys=true, separators=(',', ':')) }}", R"({"x": {"b": 1, "a": [2, 3]}})"),
            R"({"a":[2,3],"b":1})");
  EXPECT_EQ(render("{{ '🌍é' | tojson(ensure_ascii=true) }}"), R"("\ud83c\udf0d\u00e9")");
  EXPECT_EQ(error_of("{{ nothing | tojson }}"),
            "chat template line 1, column 12: tojson: object of type Undefined is not JSON serializable");
}

TEST(JinjaExpressions, Tests) {
  EXPECT_EQ(
      render("{{ 'x' is string }} {{ 1 is number }} {{ true is number }} {{ {} is mapping }} {{ [] is sequence }}"),
      "True True True True True");
  EXPECT_EQ(render("{{ none is none }} {{ nothing is none }} {{ true is true }} {{ 1 is true }} {{ false is false }}"),
            "True False True False True");
  EXPECT_EQ(render("{{ nothing is undefined }} {{ 1 is not defined }} {{ 'a' is iterable }} {{ 3 is iterable }}"),
            "True False True False");
  EXPECT_EQ(render("{{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 'a' is in ['a'] }} {{ 2 is gt 1 }}"),
            "True True True True");
  EXPECT_EQ(error_of("{{ 1 is nosuch }}"), "chat template line 1, column 9: syntax error: no test named 'nosuch'");
}

TEST(JinjaExpressions, GlobalFunctions) {
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(5, 0, -2) | list }}"), "[0, 1, 2] [5, 3, 1]");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }} {{ dict(k='v') }}"), "12 {'k': 'v'}");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");
  EXPECT_EQ(error_of("{{ range(200000) | length }}"),
            "chat template line 1, column 9: range too big, the sandbox allows at most 100000 items");
  EXPECT_EQ(error_of("{{ 'x'() }}"), "chat template line 1, column 7: 'str' object is not callable");
}

}  // namespace
}  // namespace jet::jinja::testing
