// Statements and layout of the chat-template interpreter: whitespace control and the
// trim_blocks / lstrip_blocks options, loops, assignment scoping, macros, raise_exception, and
// syntax errors that name line and column.
#include <gtest/gtest.h>

#include "chat/jinja_test_helpers.h"
#include "chat/jinja_globals.h"

namespace jet::jinja::testing {
namespace {

constexpr LexerOptions kPlainJinja{false, false};  // Jinja's own defaults

TEST(JinjaWhitespace, TrimAndLstripBlocksAsTransformersUsesThem) {
  const std::string source = "a\n  {% if true %}\n  b\n  {% endif %}\n  c\n";
  // The block lines vanish entirely; one trailing newline of the template is dropped.
  EXPECT_EQ(render(source), "a\n  b\n  c");
  EXPECT_EQ(render(source, "{}", kPlainJinja), "a\n  \n  b\n  \n  c");
  // Variable tags are not left-stripped, and only the newline after a block tag is trimmed.
  EXPECT_EQ(render("  {{ 1 }}\n  {% if true %}x{% endif %}\ny"), "  1\nxy");
}

TEST(JinjaWhitespace, DashesStripAllWhitespaceAndPlusKeepsIt) {
  EXPECT_EQ(render("a  \n {%- if true -%} \n b {{- ' c ' -}}  \n d{% endif %}"), "ab c d");
  EXPECT_EQ(render("x {#- comment -#}   y"), "xy");
  EXPECT_EQ(render("a\n    {%+ if true %}indent kept{% endif %}"), "a\n    indent kept");
  EXPECT_EQ(render("{% if true +%}\nnewline kept{% endif %}"), "\nnewline kept");
  EXPECT_EQ(render("  {# comment line #}\nnext"), "next");
}

TEST(JinjaWhitespace, WindowsNewlinesBecomeNewlines) {
  EXPECT_EQ(render("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"), "a\nb\n");
}

TEST(JinjaLoops, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "013TrueFalse3;122FalseFalse3;231FalseTrue3;");
  EXPECT_EQ(
      render(
          "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }}]{% endfor %}"),
      "[|2|a][1|3|b][2||a]");
}

TEST(JinjaLoops, ElseFilterUnpackingAndLoopControls) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4, 5] if x % 2 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}"),
            "1:1/3 3:2/3 5:3/3 ");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"z": 1, "a": 2}})"),
            "z=1;a=2;");
  EXPECT_EQ(
      render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
             "{{ i }}{% endfor %}"),
      "023");
  EXPECT_EQ(render("{% for m in ms[::-1] %}{{ m }}{% endfor %}", R"({"ms": [1, 2, 3]})"), "321");
  EXPECT_EQ(error_of("{% for a, b in [[1]] %}{% endfor %}"),
            "chat template line 1, column 1: not enough values to unpack (expected 2, got 1)");
}

TEST(JinjaScoping, SetInsideLoopsStaysInTheIterationAndNamespacesCarryState) {
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}[{{ x }}]"), "[5][5][5]");
  EXPECT_EQ(render("{% set ns = namespace(found=false, at=-1) %}{% for m in ms %}{% if not ns.found and m == 'u' %}"
                   "{% set ns.found = true %}{% set ns.at = loop.index0 %}{% endif %}{% endfor %}{{ ns.at }}",
                   R"({"ms": ["s", "u", "u"]})"),
            "1");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ a + b }} {% set captured %} x{{ 1 }} {% endset %}[{{ captured }}]"),
            "3 [ x1 ]");
  // transformers' generation tag renders its body in place, in a scope of its own.
  EXPECT_EQ(render("{% set x = 1 %}{% generation %}{% set x = 2 %}{{ x }}{% endgeneration %}{{ x }}"), "21");
  EXPECT_EQ(error_of("{% set m = {} %}{% set m.x = 1 %}"),
            "chat template line 1, column 17: cannot assign attribute on non-namespace object 'm'");
}

TEST(JinjaMacros, ParametersDefaultsAndRecursion) {
  EXPECT_EQ(
      render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}{{ m() }}"),
      "[1B][12][43][B]");
  EXPECT_EQ(render("{% macro fact(n) %}{{ 1 if n <= 1 else n * fact(n - 1) | int }}{% endmacro %}{{ fact(5) }}"),
            "120");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "chat template line 1, column 35: macro 'm' takes not more than 1 argument(s)");
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("macro calls nested deeper than"),
            std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesMessageOnly) {
  const std::string source =
      "{% if ms | length > 1 %}{{ raise_exception('Only one message, got ' ~ ms | length) }}{% endif %}";
  EXPECT_EQ(render(source, R"({"ms": [1]})"), "");
  try {
    render(source, R"({"ms": [1, 2]})");
    FAIL() << "raise_exception did not raise";
  } catch (const TemplateRaisedError& e) {
    EXPECT_STREQ(e.what(), "Only one message, got 2");
  }
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line one\n{{ 1 + }}"),
            "chat template line 2, column 8: syntax error: unexpected end of print statement");
  EXPECT_EQ(
      error_of("{% if x %}\n  text"),
      "chat template line 2, column 7: syntax error: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(error_of("{% for x in y %}\n   {% endif %}"),
            "chat template line 2, column 7: syntax error: unknown tag 'endif', expected 'endfor' or 'else'");
  EXPECT_EQ(error_of("ok\n  {{ 'unterminated }}"),
            "chat template line 2, column 6: syntax error: unterminated string literal");
  EXPECT_EQ(error_of("{# never closed"),
            "chat template line 1, column 1: syntax error: missing end of comment tag '#}'");
  EXPECT_EQ(error_of("{{ (1 }}"), "chat template line 1, column 7: syntax error: unexpected '}', expected ')'");
  EXPECT_EQ(error_of("{% break %}"), "chat template line 1, column 4: syntax error: 'break' outside loop");
  EXPECT_EQ(error_of("{% include 'x' %}"), "chat template line 1, column 4: syntax error: unknown tag 'include'");
  EXPECT_EQ(error_of("{{ a $ b }}"), "chat template line 1, column 6: syntax error: unexpected character '$' in tag");
}

TEST(JinjaErrors, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("nesting deeper than"), std::string::npos);
  std::string nested_ifs;
  for (int i = 0; i < 5000; ++i) nested_ifs += "{% if true %}";
  EXPECT_NE(error_of(nested_ifs).find("nesting deeper than"), std::string::npos);
}

}  // namespace
TEST(JinjaLimits, LongChainsAndSelfHoldingValuesAreErrorsNotStackOverflows) {
  auto chain = [](const std::string& head, const std::string& link, int n) {
    std::string s = head;
    for (int i = 0; i < n; ++i) s += link;
    return s;
  };
  EXPECT_NE(error_of("{{ " + chain("1", " + 1", 20000) + " }}").find("nests deeper than"), std::string::npos);
  EXPECT_NE(error_of("{{ " + chain("1", "|abs", 30000) + " }}").find("nests deeper than"), std::string::npos);
  EXPECT_NE(error_of("{{ " + chain("1", " if true else 1", 40000) + " }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}").find("holding itself"),
            std::string::npos);
  const std::string deep_list =
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}";
  EXPECT_NE(error_of(deep_list + "{{ ns.l|tojson }}").find("nested deeper than"), std::string::npos);
  EXPECT_NE(error_of(deep_list + "{{ ns.l }}").find("nested deeper than"), std::string::npos);
  EXPECT_EQ(render("{{ " + chain("1", " + 1", 500) + " }}"), "501");  // long but sane chains still work
}

}  // namespace jet::jinja::testing
