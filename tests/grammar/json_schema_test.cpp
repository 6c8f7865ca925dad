// JSON Schema -> grammar (nanoinfer/grammar.h, json_schema_to_gbnf): documents the schema allows
// are accepted (in the generated form: compact, properties in schema order), documents it
// forbids are rejected, and every keyword that cannot be enforced is an error naming it. The
// independent check of generated output (ajv) is tests/serve/grammar.test.mjs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "support/grammar_match.h"

namespace nanoinfer {
namespace {

Grammar compile(const std::string& schema) {
  return Grammar::from_gbnf(json_schema_to_gbnf(schema));
}

using test::matches;

std::string schema_error(const std::string& schema) {
  try {
    compile(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const Grammar g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(matches(g, R"({"b":"x"})"));
  EXPECT_TRUE(matches(g, R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(matches(g, R"({"b":"","c":false})"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));
  EXPECT_FALSE(matches(g, R"({})"));
  EXPECT_FALSE(matches(g, R"({"b":"x","d":1})"));
  EXPECT_FALSE(matches(g, R"({"b":1})"));
  EXPECT_FALSE(matches(g, R"({"b":"x",})"));
}

TEST(JsonSchema, AdditionalPropertiesSchemaNeverRepeatsADeclaredName) {
  const Grammar g = compile(R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
      "additionalProperties":{"type":"null"}})");
  EXPECT_TRUE(matches(g, R"({"id":1,"x":null,"i":null,"idd":null})"));
  EXPECT_FALSE(matches(g, R"({"id":1,"id":null})"));
  EXPECT_FALSE(matches(g, R"({"id":1,"x":1})"));
  const Grammar any = compile(R"({"type":"object"})");
  EXPECT_TRUE(matches(any, R"({"q":[1,{"r":null}]})"));
}

TEST(JsonSchema, ArraysItemsPrefixItemsAndCounts) {
  const Grammar g = compile(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1,2]"));
  EXPECT_TRUE(matches(g, "[1,2,3]"));
  EXPECT_FALSE(matches(g, "[1,2,3,4]"));
  EXPECT_FALSE(matches(g, "[1,\"a\"]"));
  const Grammar t = compile(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"null"}],"items":false})");
  EXPECT_TRUE(matches(t, "[]"));
  EXPECT_TRUE(matches(t, "[\"a\"]"));
  EXPECT_TRUE(matches(t, "[\"a\",null]"));
  EXPECT_FALSE(matches(t, "[\"a\",null,null]"));
  EXPECT_FALSE(matches(t, "[null]"));
  const Grammar e = compile(R"({"type":"array","maxItems":0})");
  EXPECT_TRUE(matches(e, "[]"));
  EXPECT_FALSE(matches(e, "[1]"));
}

TEST(JsonSchema, StringLengthsCountCharactersNotBytes) {
  const Grammar g = compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(matches(g, "\"\xc3\xa9\xe2\x82\xac\""));
  EXPECT_TRUE(matches(g, R"("a\nb")"));
  EXPECT_FALSE(matches(g, "\"\xc3\xa9\""));
  EXPECT_FALSE(matches(g, R"("abcd")"));
  EXPECT_FALSE(matches(g, R"("\ud800x")"));  // a lone surrogate escape is never generated
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  for (const auto& [lo, hi] :
       std::vector<std::pair<int, int>>{{-13, 127}, {0, 9}, {5, 5}, {-250, -7}, {10, 1000}, {-1, 1}}) {
    const Grammar g = compile(fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi));
    for (int v = -1200; v <= 1200; ++v) {
      EXPECT_EQ(matches(g, std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(matches(g, "-0"));
    EXPECT_FALSE(matches(g, "007"));
  }
  const Grammar x = compile(R"({"type":"integer","exclusiveMinimum":2.5,"exclusiveMaximum":6})");
  for (int v = -10; v <= 10; ++v) EXPECT_EQ(matches(x, std::to_string(v)), v >= 3 && v <= 5) << v;
  const Grammar only = compile(R"({"type":"integer","minimum":100})");
  EXPECT_TRUE(matches(only, "100"));
  EXPECT_TRUE(matches(only, "999999999999999"));
  EXPECT_FALSE(matches(only, "99"));
  EXPECT_FALSE(matches(only, "-100"));
}

TEST(JsonSchema, EnumConstAndTypeLists) {
  const Grammar g = compile(R"({"enum":["red",1,null,{"a":[true]}]})");
  EXPECT_TRUE(matches(g, R"("red")"));
  EXPECT_TRUE(matches(g, "1"));
  EXPECT_TRUE(matches(g, R"({"a":[true]})"));
  EXPECT_FALSE(matches(g, R"("blue")"));
  EXPECT_TRUE(matches(compile(R"({"const":"x\"y"})"), R"("x\"y")"));
  const Grammar t = compile(R"({"type":["string","null"],"maxLength":1})");
  EXPECT_TRUE(matches(t, "null"));
  EXPECT_TRUE(matches(t, R"("a")"));
  EXPECT_FALSE(matches(t, R"("ab")"));
  EXPECT_FALSE(matches(t, "1"));
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
  const Grammar a = compile(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})");
  EXPECT_TRUE(matches(a, "12"));
  EXPECT_TRUE(matches(a, R"("z")"));
  EXPECT_FALSE(matches(a, "true"));
  const Grammar o = compile(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
      "required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})");
  EXPECT_TRUE(matches(o, R"({"kind":"a","x":1})"));
  EXPECT_TRUE(matches(o, R"({"kind":"b"})"));
  EXPECT_FALSE(matches(o, R"({"kind":"b","x":1})"));
  const Grammar all = compile(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"type":"boolean"}},"required":["b"]}]})");
  EXPECT_TRUE(matches(all, R"({"a":1,"b":true})"));
  EXPECT_FALSE(matches(all, R"({"a":1})"));
}

TEST(JsonSchema, RecursiveRefs) {
  const Grammar g = compile(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}}})");
  EXPECT_TRUE(matches(g, R"({"v":1})"));
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"kids":[]}]})"));
  const Grammar d = compile(
      R"({"definitions":{"s":{"type":"string","maxLength":2}},"type":"array","items":{"$ref":"#/definitions/s"}})");
  EXPECT_TRUE(matches(d, R"(["ab","c"])"));
  EXPECT_FALSE(matches(d, R"(["abc"])"));
}

TEST(JsonSchema, PatternSubset) {
  const Grammar g = compile(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(?:x|yz)?$"})");
  EXPECT_TRUE(matches(g, R"("AB-123")"));
  EXPECT_TRUE(matches(g, R"("AB-123yz")"));
  EXPECT_FALSE(matches(g, R"("AB-12")"));
  EXPECT_FALSE(matches(g, R"("ab-123")"));
  const Grammar q = compile(R"({"type":"string","pattern":"^a\"b\\\\c.$"})");
  EXPECT_TRUE(matches(q, R"("a\"b\\cz")"));
  EXPECT_TRUE(matches(q, R"("a\"b\\c\t")"));
  EXPECT_FALSE(matches(q, R"("a\"b\\c\n")"));                        // '.' is not a line terminator
  const Grammar u = compile(R"({"type":"string","pattern":"ab"})");  // unanchored: anywhere
  EXPECT_TRUE(matches(u, R"("xxaby")"));
  EXPECT_FALSE(matches(u, R"("xxa")"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","format":"date"})", "'format'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"number","multipleOf":2})", "'multipleOf'"},
      {R"({"type":"number","minimum":0})", "'minimum' on a number"},
      {R"({"not":{"type":"null"}})", "'not'"},
      {R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'"},
      {R"({"type":"object","minProperties":1})", "'minProperties'"},
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "'oneOf'"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"$ref":"http://example.com/s.json"})", "'$ref'"},
      {R"({"type":"string","pattern":"(?=a)b"})", "lookarounds"},
      {R"({"type":"string","pattern":"\\bword"})", "word boundaries"},
      {R"({"type":"string","pattern":"(a)\\1"})", "'\\1'"},
      {R"({"type":"string","pattern":"a","maxLength":3})", "'pattern' together with"},
      {R"({"type":"array","items":[{"type":"string"}]})", "'items' as an array"},
      {R"({"type":"objekt"})", "unknown type"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "maxLength < minLength"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "within its bounds"},
      {R"({"type":"object","properties":{"é":{}},"additionalProperties":true})", "not plain ASCII"},
      {"false", "is false"},
      {R"({"type":"object","properties":{"a":{"type":"string"}}, "if":{}})", "'if'"},
  };
  for (const auto& [schema, needle] : cases) {
    const std::string e = schema_error(schema);
    EXPECT_NE(e.find(needle), std::string::npos) << schema << " gave: '" << e << "'";
  }
}

}  // namespace
}  // namespace nanoinfer
