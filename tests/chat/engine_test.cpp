// Unit tests of the chat-template engine on small templates: whitespace control, loops,
// scoping, macros, filters, Python str() of values, Undefined vs None, typed errors with
// positions, and the render limits. Expected strings are what Python jinja2 prints.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace kvf::chat {
namespace {

Result<std::string> render(std::string_view source, RenderLimits limits = {}) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  if (!t) return t.take_error();
  RenderInputs in;
  in.extra = Json::parse(R"({"x": 1, "y": null})");
  in.limits = limits;
  return t->render(in);
}

std::string must_render(std::string_view source) {
  Result<std::string> r = render(source);
  if (!r) return "ERROR: " + r.error().to_string();
  return *r;
}

struct Case {
  const char* source;
  const char* expected;
};

// Each expected string was printed by jinja2 3.1 with trim_blocks and lstrip_blocks.
const Case kCases[] = {
    {"a  {{- 'b' -}}  c", "abc"},
    {"x\n  {% if true %}\n  y\n  {% endif %}\nz\n", "x\n  y\nz"},
    {"{# c #}\n  {%+ if true %}k{% endif +%}\nv", "  k\nv"},
    {"{% for x in ['a','b','c'] %}{{ loop.index }}{{ x }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}"
     "{{ loop.revindex0 }},{% endfor %}",
     "1aF2,2b1,3cL0,"},
    {"{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% else %}none{% endfor %}"
     "{% for x in [] %}{% else %}empty{% endfor %}",
     "2/2 4/2 empty"},
    {"{% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
     "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     "3"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bo') }} {{ greet('Al', punct='?') }}",
     "Hi Bo! Hi Al?"},
    {"{{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ ('x',) }} {{ undefined_thing }}|{{ none }}",
     "[1, 'a', None, True, 1.5, {'k': [2]}] ('x',) |None"},
    {"{{ x is defined }} {{ y is none }} {{ x is none }} {{ y is defined }}", "True True False True"},
    {"{{ '  Hi  '|trim }}|{{ 'a,b,,c'.split(',') }}|{{ 'Hello'[1:3] }}|{{ [1,2,3][::-1] }}|{{ 'abc'|upper }}",
     "Hi|['a', 'b', '', 'c']|el|[3, 2, 1]|ABC"},
    {"{{ {'b': 1, 'a': '\xc3\xa9'}|tojson }} {{ {'a': [1, {}]}|tojson(indent=2) }} {{ '\xc3\xa9'|tojson(ensure_ascii=True) }}",
     "{\"b\": 1, \"a\": \"\xc3\xa9\"} {\n  \"a\": [\n    1,\n    {}\n  ]\n} \"\\u00e9\""},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'a' ~ 1 ~ none }} {{ 1 if false }}|{{ 'x' if 0 else 'y' }}",
     "3 -4 3.5 2 1024 a1None |y"},
    {"{{ [{'r': 'u'}, {'r': 's'}, {'r': 'u'}]|selectattr('r', 'equalto', 'u')|list|length }} "
     "{{ ['b','A','a']|unique|list }} {{ [3,1,2]|min }} {{ ['x','y']|map('upper')|join('-') }}",
     "2 ['b', 'A'] 1 X-Y"},
    {"{% set s %}  inner  {% endset %}[{{ s }}]{% filter upper %}up{% endfilter %}", "[  inner  ]UP"},
    {"{{ '{}-{name}'.format(1, name='n') }} {{ 'abc' in 'xabcx' }} {{ 2 not in [1,2] }} {{ {'a': 1}.get('b', 'dflt') }} "
     "{{ 'a' < 'b' < 'c' }}",
     "1-n True False dflt True"},
    {"{{ 'line1\\nline2'|indent(2) }}|{{ 'x'|indent(2, first=true) }}", "line1\n  line2|  x"},
    {"{{ 'a' ~ ('b'|safe + '<') }}", "ab&lt;"},
    {"{{ 1e-5 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 100.0 }} {{ -0.0 }} {{ 3.0 * 2 }}", "1e-05 1e+16 0.30000000000000004 100.0 -0.0 6.0"},
    {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in {'c': 3}|items %}{{ k }}{{ v }}{% endfor %}",
     "a=1;b=2;c3"},
    {"{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
};

TEST(ChatEngine, RendersAsJinja2) {
  for (const Case& c : kCases) EXPECT_EQ(must_render(c.source), c.expected) << c.source;
}

TEST(ChatEngine, ForBodyScopeDoesNotLeakButIfDoes) {
  EXPECT_EQ(must_render("{% for i in [1] %}{% set a = 5 %}{% endfor %}[{{ a }}]{% if true %}{% set b = 6 %}{% endif %}{{ b }}"),
            "[]6");
  // Macros see the variables of the scope they were defined in, at call time.
  EXPECT_EQ(must_render("{% set v = 1 %}{% macro m() %}{{ v }}{% endmacro %}{% set v = 2 %}{{ m() }}"), "2");
}

TEST(ChatEngine, ListsAreSharedLikePython) {
  EXPECT_EQ(must_render("{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.append('b') %}"
                        "{{ ns.ids.pop(0) }}{{ ns.ids }}"),
            "a['b']");
}

TEST(ChatEngine, RaiseExceptionIsATypedErrorWithTheMessage) {
  Result<std::string> r = render("ok {{ raise_exception('roles must alternate') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.error().message().find("roles must alternate"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("template 1:"), std::string::npos) << r.error().message();
}

TEST(ChatEngine, UndefinedIsNotNone) {
  EXPECT_EQ(must_render("{{ nothing is none }} {{ nothing|default('d') }} {{ y|default('d') }} {{ nothing|length }}"),
            "False d None 0");
  // Looking into Undefined fails as in Jinja; looking into None yields Undefined.
  EXPECT_EQ(must_render("{{ y.z is defined }}"), "False");
  Result<std::string> r = render("\n  {{ nothing.field }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("2:"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("'nothing' is undefined"), std::string::npos) << r.error().message();
}

TEST(ChatEngine, RefusesWhatItDoesNotImplement) {
  struct Refusal {
    const char* source;
    const char* what;
  };
  const Refusal refusals[] = {
      {"{% generation %}x{% endgeneration %}", "generation"},
      {"{% include 'x' %}", "include"},
      {"{% for x in y recursive %}{% endfor %}", "recursive"},
      {"{{ [1]|map('upper')|list|sum }}", "filter 'sum'"},
      {"{{ [1, 2]|map('string') }}", "generator"},
      {"{{ 'a'.title() }}", "title"},
      {"{{ x is sameasnot 1 }}", "sameasnot"},
      {"{{ '%s' % 1 }}", "'%'"},
  };
  for (const Refusal& c : refusals) {
    Result<std::string> r = render(c.source);
    ASSERT_FALSE(r.ok()) << c.source;
    EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported) << c.source << ": " << r.error().to_string();
    EXPECT_NE(r.error().message().find(c.what), std::string::npos) << r.error().message();
  }
}

TEST(ChatEngine, SyntaxErrorsCarryLineAndColumn) {
  Result<std::string> r = render("line one\n{% if x %}\n{{ x + }}\n{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.error().message().find("template 3:"), std::string::npos) << r.error().message();
  Result<std::string> unclosed = render("{% if x %}never closed");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.error().message().find("endif"), std::string::npos) << unclosed.error().message();
  Result<std::string> string = render("{{ 'open }}");
  EXPECT_FALSE(string.ok());
}

TEST(ChatEngine, RunawayTemplatesStopWithCapacityErrors) {
  Result<std::string> recursion = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(recursion.ok());
  EXPECT_EQ(recursion.error().code(), ErrorCode::kCapacity) << recursion.error().to_string();

  RenderLimits small;
  small.max_output_bytes = 1000;
  Result<std::string> big = render("{% for i in range(2000) %}xy{% endfor %}", small);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), ErrorCode::kCapacity);

  Result<std::string> huge_range = render("{{ range(1000000000)|length }}");
  ASSERT_FALSE(huge_range.ok());
  EXPECT_EQ(huge_range.error().code(), ErrorCode::kCapacity);

  Result<std::string> huge_string = render("{{ 'x' * 100000000 }}");
  ASSERT_FALSE(huge_string.ok());
  EXPECT_EQ(huge_string.error().code(), ErrorCode::kCapacity);

  RenderLimits few_steps;
  few_steps.max_steps = 1000;
  Result<std::string> loop = render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", few_steps);
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.error().code(), ErrorCode::kCapacity);

  Result<std::string> nested = render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().code(), ErrorCode::kUnsupported);
}

TEST(ChatEngine, RendersMessagesToolsAndTokens) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if tools is defined %}{{ tools|tojson }}{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}"
      "{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  RenderInputs in;
  in.messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  in.bos_token = "<s>";
  in.add_generation_prompt = true;
  in.tools = Json::parse(R"([{"b": 1, "a": 2}])");  // key order is kept, as json.loads does
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  in.now = now;
  Result<std::string> r = t->render(in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, "<s><user>hi[{\"b\": 1, \"a\": 2}]<assistant>26 Jul 2024");
}

TEST(ChatLexer, WhitespaceControlIsAppliedToText) {
  Result<std::vector<Token>> t = tokenize("a \n{%- if x -%}\n b{% endif %}\n");
  ASSERT_TRUE(t.ok());
  ASSERT_GE(t->size(), 2u);
  EXPECT_EQ((*t)[0].kind, TokenKind::kText);
  EXPECT_EQ((*t)[0].text, "a");
}

}  // namespace
}  // namespace kvf::chat
