// Errors from the Jinja interpreter: syntax errors and render errors carry the template line and a
// Status code a server can map to a 400; limits stop runaway templates; no input, however
// malformed, crashes the interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tokenizer/chat_template/jinja_template.h"

namespace locus::jinja {
namespace {

using testing::HasSubstr;

Status parse_status(std::string_view source) {
  return Template::parse(source).status();
}

Status render_status(std::string_view source, const RenderOptions& options = {}) {
  auto compiled = Template::parse(source);
  if (!compiled) return compiled.error();
  return compiled->render(nlohmann::ordered_json::object(), options).status();
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  Status s = parse_status("line one\n{% if x %}\n{% endfor %}");
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("line 3"));
  EXPECT_THAT(s.message(), HasSubstr("Encountered unknown tag 'endfor'."));
  EXPECT_THAT(s.message(), HasSubstr("'elif' or 'else' or 'endif'"));

  s = parse_status("{% for x in y %}\nbody\n");
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_THAT(s.message(), HasSubstr("Unexpected end of template"));
  EXPECT_THAT(s.message(), HasSubstr("The innermost block that needs to be closed is 'for'."));

  EXPECT_THAT(parse_status("a\nb\n{{ x | nope }}").message(),
              HasSubstr("line 3: No filter named 'nope'."));
  EXPECT_THAT(parse_status("{{ x is nope }}").message(), HasSubstr("No test named 'nope'."));
  EXPECT_THAT(parse_status("\n\n{{ 'unterminated }}").message(), HasSubstr("line 3"));
  EXPECT_THAT(parse_status("{{ (1 }}").message(), HasSubstr("unexpected '}'"));
  EXPECT_THAT(parse_status("{{ [1) }}").message(), HasSubstr("unexpected ')', expected ']'"));
  EXPECT_THAT(parse_status("{{ 1 ! 2 }}").message(), HasSubstr("unexpected char '!'"));
  EXPECT_THAT(parse_status("{% set true = 1 %}").message(), HasSubstr("can't assign"));
  EXPECT_THAT(parse_status("{% break %}").message(), HasSubstr("'break' outside of a loop"));
  EXPECT_THAT(parse_status("{% include 'x.j2' %}").message(), HasSubstr("not supported"));
  EXPECT_THAT(parse_status("{% macro m(a=1, b) %}{% endmacro %}").message(),
              HasSubstr("non-default argument follows default argument"));
  EXPECT_THAT(parse_status("{{ '\\x4' }}").message(), HasSubstr("truncated"));
}

TEST(JinjaErrors, RenderErrorsNameTheLine) {
  Status s = render_status("a\n\n{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "line 3: raise_exception: Conversation roles must alternate");

  s = render_status("{% set m = {'role': 'user'} %}\n{{ m.content.strip() }}");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "line 2: 'dict object' has no attribute 'content'");

  s = render_status("{% macro f() %}\n\n{{ 1 + 'a' }}{% endmacro %}{{ f() }}");
  EXPECT_EQ(s.message(), "line 3: unsupported operand type(s) for +: 'int' and 'str'");

  s = render_status("{{ [1].append(2) }}");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("sandbox: access to attribute 'append' of 'list' object is unsafe."));
}

TEST(JinjaErrors, LimitsStopRunawayTemplates) {
  RenderOptions options;
  options.limits.max_steps = 1000;
  Status s = render_status(
      "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", options);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);

  options = {};
  options.limits.max_output_bytes = 100;
  s = render_status("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", options);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("output exceeded 100 bytes"));

  s = render_status("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("macro calls nested deeper than"));

  EXPECT_THAT(render_status("{{ range(1000000) }}").message(), HasSubstr("Range too big"));
  EXPECT_EQ(render_status("{{ 'x' * 100000000000 }}").code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(render_status("{{ 9223372036854775807 + 1 }}").message(), HasSubstr("out of range"));
}

TEST(JinjaErrors, DeepNestingIsRefusedNotACrash) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(parse_status(deep).message(), HasSubstr("nested too deeply"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i)
    ifs += "{% if true %}";
  EXPECT_EQ(parse_status(ifs).code(), ErrorCode::kParseError);
  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 5000; ++i)
    nots += "not ";
  EXPECT_EQ(parse_status(nots + "1 }}").code(), ErrorCode::kParseError);
}

TEST(JinjaErrors, VariablesMustBeAnObject) {
  auto compiled = Template::parse("x");
  ASSERT_TRUE(compiled.has_value());
  EXPECT_EQ(compiled->render(nlohmann::ordered_json::array()).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(JinjaErrors, StrftimeNowUsesTheGivenTime) {
  auto compiled = Template::parse("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(compiled.has_value());
  RenderOptions options;
  options.now = std::chrono::system_clock::from_time_t(1736942400 + 3600 * 24 * 200);  // mid-2025
  setenv("TZ", "UTC", 1);
  tzset();
  auto out = compiled->render(nlohmann::ordered_json::object(), options);
  ASSERT_TRUE(out.has_value()) << out.error().to_string();
  EXPECT_EQ(*out, "2025-08-03|03 Aug 2025");
}

TEST(JinjaErrors, OneTemplateRendersFromManyThreads) {
  auto compiled = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m }}{% "
      "endfor %}{{ ns.n }}");
  ASSERT_TRUE(compiled.has_value());
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      nlohmann::ordered_json vars = {{"messages", nlohmann::ordered_json::array({t, "x", t})}};
      for (int i = 0; i < 200; ++i)
        results[t] = compiled->render(vars).value_or("failed");
    });
  }
  for (auto& thread : threads)
    thread.join();
  for (size_t t = 0; t < results.size(); ++t) {
    EXPECT_EQ(results[t], std::to_string(t) + "x" + std::to_string(t) + "3");
  }
}

// Random templates assembled from Jinja fragments, and random bytes: every one must come back as
// a value or a Status, never a crash or a hang.
TEST(JinjaErrors, RandomTemplatesNeverCrash) {
  const std::vector<std::string> fragments = {"{{",
                                              "}}",
                                              "{%",
                                              "%}",
                                              "{#",
                                              "#}",
                                              "{%-",
                                              "-%}",
                                              "{{-",
                                              "-}}",
                                              "if",
                                              "for",
                                              "in",
                                              "endfor",
                                              "endif",
                                              "else",
                                              "elif",
                                              "set",
                                              "endset",
                                              "macro",
                                              "endmacro",
                                              "call",
                                              "endcall",
                                              "filter",
                                              "endfilter",
                                              "x",
                                              "y",
                                              "ns",
                                              "namespace(a=1)",
                                              "ns.a",
                                              "loop.index",
                                              "messages",
                                              "(",
                                              ")",
                                              "[",
                                              "]",
                                              "{",
                                              "}",
                                              ",",
                                              ":",
                                              ".",
                                              "|",
                                              "~",
                                              "+",
                                              "-",
                                              "*",
                                              "/",
                                              "//",
                                              "%",
                                              "**",
                                              "==",
                                              "!=",
                                              "<",
                                              ">",
                                              "not",
                                              "and",
                                              "or",
                                              "is",
                                              "defined",
                                              "none",
                                              "true",
                                              "\"s\"",
                                              "'t'",
                                              "1",
                                              "2.5",
                                              "0x1f",
                                              "tojson",
                                              "length",
                                              "items()",
                                              "trim",
                                              "join",
                                              "map",
                                              "select",
                                              "raw",
                                              "endraw",
                                              "break",
                                              "continue",
                                              "range(3)",
                                              "caller()",
                                              "x[1:]",
                                              "x[::-1]",
                                              "\n",
                                              " ",
                                              "a",
                                              "\xc3\xa9",
                                              "\\",
                                              "\"",
                                              "'",
                                              "=",
                                              "generation",
                                              "endgeneration",
                                              "with",
                                              "endwith",
                                              "print",
                                              "-",
                                              "+",
                                              "\xff",
                                              "recursive"};
  std::mt19937 rng(12345);
  nlohmann::ordered_json vars = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"x", {1, 2, 3}}, {"y", {{"a", 1}}}};
  RenderOptions options;
  options.limits.max_steps = 10000;
  options.limits.max_output_bytes = 1 << 16;
  int rendered = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string source;
    if (i % 10 == 0) {
      std::uniform_int_distribution<int> byte(0, 255);
      for (int k = rng() % 60; k > 0; --k)
        source.push_back(static_cast<char>(byte(rng)));
    } else {
      for (int k = 1 + rng() % 25; k > 0; --k)
        source += fragments[rng() % fragments.size()] + (rng() % 2 ? " " : "");
    }
    auto compiled = Template::parse(source);
    if (!compiled) {
      EXPECT_EQ(compiled.error().code(), ErrorCode::kParseError) << source;
      continue;
    }
    auto out = compiled->render(vars, options);
    rendered += out.has_value();
    if (!out) {
      EXPECT_NE(out.error().code(), ErrorCode::kInternal) << source << "\n"
                                                          << out.error().to_string();
    }
  }
  EXPECT_GT(rendered, 100);  // the generator does produce valid templates
}

}  // namespace
}  // namespace locus::jinja
