// The Jinja interpreter feature by feature. Expected strings are what Python Jinja2 3.1 renders in
// transformers' environment (trim_blocks, lstrip_blocks, HF tojson), checked when written.
#include <gtest/gtest.h>

#include "ft/protocol/jinja.h"

namespace ft::protocol::jinja {
namespace {

// Renders `src` with `context_json` as variables; returns the text or "ERROR: <message>".
std::string render(const std::string& src, const std::string& context_json = "{}") {
  auto t = Template::parse(src);
  if (!t) return "ERROR: " + t.status().message();
  auto ctx = from_json(context_json);
  if (!ctx) return "ERROR: bad context";
  auto out = t->render(*ctx);
  return out ? *out : "ERROR: " + out.status().message();
}

bool is_error(const std::string& s) { return s.rfind("ERROR: ", 0) == 0; }

TEST(JinjaTest, TextAndExpressions) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "world"})"), "Hello world!");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"), "7 9 3 -4 2 1024");
  EXPECT_EQ(render("{{ 10 / 4 }} {{ 10 / 2 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 0.00001 }}"),
            "2.5 5.0 2.5 0.30000000000000004 1e+20 1e-05");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' + 'cd' }} {{ 'ab' * 2 }}"), "a1NoneTrue abcd abab");
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ undefined_name }}|{{ [1, 'a', none, false] }}|{{ {'k': 'v', 'n': 1.0} }}"),
            "None|True||[1, 'a', None, False]|{'k': 'v', 'n': 1.0}");
  EXPECT_EQ(render("{{ \"it's\" }} {{ ['it\\'s', 'x\"y'] }}"), "it's [\"it's\", 'x\"y']");
  EXPECT_EQ(render("{{ 'a' if x else 'b' }}{{ 'c' if not x }}", R"({"x": 0})"), "bc");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }}"), "True False True True True");
  EXPECT_EQ(render("{{ x and 'yes' or 'no' }} {{ y or 'fallback' }}", R"({"x": 1, "y": ""})"), "yes fallback");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }}", R"({"d": {"k": 1}})"),
            "True True True True");
}

TEST(JinjaTest, IndexingAndSlicing) {
  const char* ctx = R"({"xs": [1, 2, 3, 4], "s": "héllo", "d": {"a": {"b": 5}}})";
  EXPECT_EQ(render("{{ xs[0] }} {{ xs[-1] }} {{ xs[1:3] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[10] }}", ctx),
            "1 4 [2, 3] [4, 3, 2, 1] [1, 3] ");
  EXPECT_EQ(render("{{ s[1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s|length }}", ctx), "é él olléh 5");
  EXPECT_EQ(render("{{ d.a.b }} {{ d['a']['b'] }} {{ d.missing }}|{{ d.a.missing is defined }}", ctx), "5 5 |False");
  EXPECT_TRUE(is_error(render("{{ d.missing.deeper }}", ctx)));
}

TEST(JinjaTest, WhitespaceControlMatchesTransformersSettings) {
  // lstrip_blocks + trim_blocks: block tags alone on a line leave no trace.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n{# c #}\nz\n"), "  x\n  y\nz");
  EXPECT_EQ(render("a {% if true %}b{% endif %}   {% if true %}c{% endif %}"), "a b   c");
  EXPECT_EQ(render("a  \n  {%- if true -%}  \n b {%+ if true %}c{% endif %}{% endif %}"), "ab c");
  EXPECT_EQ(render("x\n    {%+ if true %}c{% endif %}\n  {% if true %}d{% endif %}"), "x\n    cd");
  EXPECT_EQ(render("{{- ' x ' -}}  \n  {{ 'y' }}"), " x y");
  EXPECT_EQ(render("line\n"), "line");  // keep_trailing_newline=False
  EXPECT_EQ(render("{% for i in [1, 2] %}\n{{ i }}\n{% endfor %}\n"), "1\n2\n");
}

TEST(JinjaTest, ForLoops) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                   R"({"xs": ["a", "b"]})"),
            "10TrueFalse2;21FalseTrue2;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem if loop.previtem is defined else '-' }}{{ loop.nextitem | default('.') }}{% endfor %}",
                   R"({"xs": [1, 2, 3]})"),
            "-2132.");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "b=1;a=2;");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "ba");
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% endfor %}", R"({"xs": [1, 2, 3]})"), "2/2 3/2 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  // A set inside a loop body does not leak out, and each iteration starts from the outer value.
  EXPECT_EQ(render("{% set c = 0 %}{% for i in [1, 2, 3] %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}"), "1110");
  EXPECT_EQ(render("{% for c in 'ab' %}{{ c }}.{% endfor %}"), "a.b.");
}

TEST(JinjaTest, SetNamespaceAndMacros) {
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% set ns = namespace(n=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ ns.found }}"),
            "6 False");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[inner 2]");
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  // Macros see their defining scope at call time, not the caller's loop variables.
  EXPECT_EQ(render("{% macro m() %}{{ z }}{% endmacro %}{% set z = 1 %}{{ m() }}{% set z = 2 %}{{ m() }}"), "12");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_TRUE(is_error(render("{% set x = 1 %}{% set x.attr = 2 %}")));
}

TEST(JinjaTest, Filters) {
  EXPECT_EQ(render("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ 'hello world'|capitalize }}|{{ 'hello world'|title }}"),
            "a b|a|ABab|Hello world|Hello World");
  EXPECT_EQ(render("{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'a']|unique|list }} {{ [1, 2]|reverse|list }}"),
            "[1, 2, 3] [3, 2, 1] ['b', 'A'] [2, 1]");
  EXPECT_EQ(render("{{ xs|first }} {{ xs|last }} {{ xs|length }} {{ xs|join(', ') }} {{ xs|count }}", R"({"xs": ["a", "b", "c"]})"), "a c 3 a, b, c 3");
  EXPECT_EQ(render("{{ missing|default('d') }} {{ ''|default('e', true) }} {{ ''|default('f') }}|"), "d e |");
  EXPECT_EQ(render("{{ '42'|int + 1 }} {{ 3.9|int }} {{ 'x'|int }} {{ '2.5'|float }} {{ 5|string ~ '!' }}"), "43 3 0 2.5 5!");
  EXPECT_EQ(render("{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }}"), "a+b+c bba");
  const char* people = R"({"ps": [{"n": "a", "ok": true, "age": 3}, {"n": "b", "ok": false, "age": 1}, {"n": "c", "age": 2}]})";
  EXPECT_EQ(render("{{ ps|selectattr('ok')|map(attribute='n')|list }} {{ ps|rejectattr('ok')|map(attribute='n')|join }}", people),
            "['a'] bc");
  EXPECT_EQ(render("{{ ps|selectattr('n', 'equalto', 'b')|map(attribute='age')|first }} {{ ps|sort(attribute='age')|map(attribute='n')|join }}", people),
            "1 bca");
  EXPECT_EQ(render("{{ [1, 2, 3]|select('odd')|list }} {{ ['a', 'b']|map('upper')|list }}"), "[1, 3] ['A', 'B']");
  EXPECT_EQ(render("{{ d|items|list|length }} {% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}", R"({"d": {"x": 1}})"), "1 x1");
  EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ '<b>'|safe }} {{ '<b>'|e }}"), "<b> &lt;b&gt;");
}

TEST(JinjaTest, TojsonMatchesTransformers) {
  const char* ctx = R"({"v": {"b": 1.0, "a": [1, 2, {}], "s": "é\"\n<", "n": null, "t": true, "e": []}})";
  EXPECT_EQ(render("{{ v|tojson }}", ctx), R"({"b": 1.0, "a": [1, 2, {}], "s": "é\"\n<", "n": null, "t": true, "e": []})");
  EXPECT_EQ(render("{{ v.s|tojson(ensure_ascii=true) }}", ctx), R"("\u00e9\"\n<")");
  EXPECT_EQ(render("{{ [1, {'k': 2}]|tojson(indent=2) }}"), "[\n  1,\n  {\n    \"k\": 2\n  }\n]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ [1, 2]|tojson(separators=[',', ':']) }}"), R"({"a": 2, "b": 1} [1,2])");
  EXPECT_EQ(render("{{ '😀'|tojson(ensure_ascii=true) }}"), R"("\ud83d\ude00")");
}

TEST(JinjaTest, Tests) {
  const char* ctx = R"({"s": "x", "n": 1, "f": 1.5, "l": [1], "d": {"a": 1}, "z": null, "b": true})";
  EXPECT_EQ(render("{{ s is string }}{{ n is number }}{{ f is float }}{{ n is integer }}{{ b is number }}{{ b is integer }}", ctx),
            "TrueTrueTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is sequence }}{{ d is sequence }}{{ n is iterable }}", ctx),
            "TrueFalseTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ z is none }}{{ q is defined }}{{ q is undefined }}{{ b is true }}{{ n is true }}{{ b is false }}", ctx),
            "TrueFalseTrueTrueFalseFalse");
  EXPECT_EQ(render("{{ n is equalto 1 }}{{ 3 is divisibleby 3 }}{{ 1 is in l }}{{ n is not none }}{{ q is iterable }}", ctx),
            "TrueTrueTrueTrueTrue");
}

TEST(JinjaTest, StringAndDictMethods) {
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a,b', 'c'] ['a', 'b,c']");
  EXPECT_EQ(render("{{ 'xhix'.strip('x') }} {{ '\n a \n'.lstrip() }}| {{ 'ab\n\n'.rstrip('\n') }} {{ '<t>x'.startswith('<t>') }} {{ 'x</t>'.endswith(('</t>', 'q')) }}"),
            "hi a \n| ab True True");
  EXPECT_EQ(render("{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'Hello'.lower() }}{{ 'Hello'.upper() }} {{ 'a-a'.replace('-', '') }} {{ '-'.join(['a', 'b']) }}"),
            "2 -1 helloHELLO aa a-b");
  const char* ctx = R"({"d": {"a": 1, "b": 2}})";
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 9) }} {{ d.keys()|list }} {{ d.values()|list }}", ctx), "1 None 9 ['a', 'b'] [1, 2]");
  // The immutable sandbox hides mutating methods: they look up as undefined.
  EXPECT_EQ(render("{{ d.update is defined }} {{ d.items is defined }}", ctx), "False True");
}

TEST(JinjaTest, GlobalsAndRaise) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1)|tojson }}"), "[0, 1, 2] [1, 3, 5] {\"a\": 1}");
  std::string r = render("{{ raise_exception('bad input') }}");
  EXPECT_TRUE(is_error(r));
  EXPECT_NE(r.find("bad input"), std::string::npos);
  EXPECT_NE(r.find("line 1"), std::string::npos);
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaTest, ErrorsNameLineAndColumnAndNeverCrash) {
  std::string r = render("line one\n{{ 1 + }}");
  ASSERT_TRUE(is_error(r));
  EXPECT_NE(r.find("line 2"), std::string::npos) << r;
  r = render("ok\n  {% frobnicate %}");
  EXPECT_NE(r.find("unknown tag 'frobnicate'"), std::string::npos) << r;
  EXPECT_NE(r.find("line 2, column 6"), std::string::npos) << r;
  r = render("{{ x|no_such_filter }}");
  EXPECT_NE(r.find("no filter named 'no_such_filter'"), std::string::npos) << r;
  r = render("{% if x is no_such_test %}{% endif %}");
  EXPECT_NE(r.find("no test named"), std::string::npos) << r;
  for (const char* bad : {"{% if x %}", "{% for %}", "{{ ", "{{ 'unterminated }}", "{% endfor %}", "{# open", "{{ (1, }}",
                          "{% set %}", "{{ a[ }}", "{% macro m( %}{% endmacro %}", "{{ 1 / 0 }}", "{{ 'a' + 1 }}",
                          "{{ none.x.y }}", "{{ [1][:] + {} }}", "{% for a, b in [1] %}{% endfor %}", "{{ 'a' < 1 }}",
                          "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", "{{ x() }}", "{{ 'a' % 1 }}"}) {
    EXPECT_TRUE(is_error(render(bad))) << bad << " -> " << render(bad);
  }
}

}  // namespace
}  // namespace ft::protocol::jinja
