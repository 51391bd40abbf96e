// The reports of arb_verify and arb_tune (core/api/verify_problem.hpp, tune_problems.hpp): valid
// JSON whatever the text in them, the fields docs/c-api.md lists, and where tuning writes.
#include "api/tune_problems.hpp"
#include "api/verify_problem.hpp"
#include "common/failure.hpp"
#include "common/json_writer.hpp"
#include "json_check.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace arbiter;
using test::Json;
using test::JsonReader;

namespace {

// The speeds fixture only (three honest softmax kernels), with a short budget; the oracle
// verifies but is not timed.
std::unique_ptr<Context> speeds_context(const std::string& extra = "") {
  return test::make_context(test::config_loading(
      {test::fixture_file("speeds")}, "[tune]\nbudget_ms = 20\nexclude = [\"reference.softmax\"]\n" + extra));
}

std::vector<SuiteProblem> problems_of(std::initializer_list<const char*> texts) {
  std::vector<SuiteProblem> out;
  for (const char* text : texts) {
    SuiteProblem p;
    p.text = text;
    p.parsed = parse_problem(text);
    out.push_back(std::move(p));
  }
  return out;
}

arb_status status_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Failure& e) {
    return e.status();
  }
  return ARB_OK;
}

}  // namespace

TEST_CASE("JSON writer: any text becomes a valid string, a number that is not finite null") {
  const std::string nasty = std::string("quote \" backslash \\ newline \n tab \t cr \r bell \x07 nul ") + '\0' +
                            " del \x7f é \xe2\x82\xac \xf0\x9f\x98\x80";
  CHECK(JsonReader::parse(json_string(nasty)).str() == nasty);
  // Bytes that start no valid UTF-8 sequence become U+FFFD, one each.
  const std::string broken = "a\xff" "b\xe2\x82" "c\xc0\xaf" "d\xed\xa0\x80" "e";
  const std::string repaired = JsonReader::parse(json_string(broken)).str();
  CHECK(repaired.find("\xff") == std::string::npos);
  CHECK(repaired.rfind("a\xef\xbf\xbd" "b", 0) == 0);
  CHECK(repaired.back() == 'e');
  CHECK(json_number(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_number(-std::numeric_limits<double>::infinity()) == "null");
  CHECK(JsonReader::parse(json_number(1.5e-7)).num() == 1.5e-7);
  CHECK(JsonReader::parse(json_number(1e300)).num() == 1e300);

  JsonWriter w;
  w.begin_object().key("a").begin_array().value(1).value(2.5).value(true).null().end_array();
  w.key("b").begin_object().end_object().key("c").value(std::optional<std::string>()).key("d").value("x");
  w.key("e").begin_array().end_array().key("nan").value(std::nan("")).end_object();
  const Json j = JsonReader::parse(w.text());
  CHECK(j["a"].items.size() == 4);
  CHECK(j["a"][1].num() == 2.5);
  CHECK(j["a"][3].is_null());
  CHECK(j["b"].fields.empty());
  CHECK(j["c"].is_null());
  CHECK(j["d"].str() == "x");
  CHECK(j["nan"].is_null());
}

TEST_CASE("verification_json: every kernel's verdict, failures with their checks and detail") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("cheaters"));
  files.push_back(test::fixture_file("speeds"));
  const auto context = test::make_context(test::config_loading(files));
  const arb_problem p = parse_problem("softmax f32 rows=4 cols=64").problem;
  const ProblemVerification v = verify_problem(*context, p, {});
  const Json j = JsonReader::parse(verification_json(v));
  CHECK(j["problem"].str() == problem_key(p));
  const Json& verdicts = j["verdicts"];
  REQUIRE(verdicts.items.size() == v.kernels.size());
  int passed = 0, failed = 0, oracle = 0;
  for (const Json& k : verdicts.items) {
    CAPTURE(k["kernel"].str());
    const std::string& result = k["result"].str();
    CHECK(k["kernel"].str().rfind(k["plugin"].str() + ".", 0) == 0);
    CHECK_FALSE(k["provenance"].str().empty());
    CHECK_FALSE(k["summary"].str().empty());
    if (result == "passed") {
      ++passed;
      CHECK(k["failed_checks"].items.empty());
      CHECK(k["max_error"].num() >= 0);
    } else if (result == "failed") {
      ++failed;
      CHECK_FALSE(k["failed_checks"].items.empty());
      CHECK_FALSE(k["detail"].str().empty());
      CHECK(k["summary"].str().rfind("failed: ", 0) == 0);
    } else if (result == "oracle") {
      ++oracle;
      CHECK(k["plugin"].str() == "reference");
      CHECK(k["max_error"].is_null());
    } else {
      CHECK(result == "refuses");
    }
  }
  CHECK(passed == v.passed);
  CHECK(failed == v.failed);
  CHECK(oracle == 1);
  CHECK(j["passed"].num() == passed);
  CHECK(j["failed"].num() == failed);
  CHECK(failed >= 9);  // the gallery (tests/fixtures/cheaters.cpp)
  CHECK(passed >= 3);  // cpu.softmax, speeds.*
  // One kernel, by name.
  VerifyRequest one;
  one.only_kernel = "cheaters.writes_nothing";
  const Json single = JsonReader::parse(verification_json(verify_problem(*context, p, one)));
  REQUIRE(single["verdicts"].items.size() == 1);
  CHECK(single["verdicts"][0]["result"].str() == "failed");
  CHECK(single["failed"].num() == 1);
}

TEST_CASE("tune_problems: into a file of its own (the context's table untouched), and the JSON per problem") {
  test::TempDir dir;
  const std::string own = dir.file("own.toml"), other = dir.file("other/tuned.toml");
  const auto context = speeds_context("[table]\npath = \"" + own + "\"\n");
  // An origin with quotes, a backslash and a newline, as a suite may have it.
  const ShapeSuite suite = parse_suite(
      "name = \"t\"\n[[problem]]\nproblem = \"softmax f32 rows=8 cols=256\"\norigin = \"a \\\"quoted\\\" \\\\ origin\\nline 2\"\n"
      "[[problem]]\nproblem = \"softmax f32 rows=4 cols=512\"\n",
      "<suite>");
  TuneRequest request;
  request.table_path = other;
  std::vector<size_t> seen;
  request.progress = [&](size_t done, size_t total, double elapsed) {
    CHECK(total == 2);
    CHECK(elapsed >= 0);
    seen.push_back(done);
    return true;
  };
  const TuneRun run = tune_problems(*context, suite.problems, request);
  CHECK(seen == std::vector<size_t>{0, 1, 2});
  CHECK_FALSE(run.cancelled);
  // The file has both winners; the context's own table neither (file or index).
  const TuningTable written = load_table_file(other);
  CHECK(written.entries().size() == 2);
  CHECK_FALSE(std::filesystem::exists(own));
  REQUIRE(context->table() != nullptr);
  CHECK_FALSE(context->table()->lookup(problem_key(suite.problems[0].parsed.problem)).has_value());

  const Json j = JsonReader::parse(tuning_json(run));
  CHECK(j["table"].str() == other);
  CHECK_FALSE(j["method"].str().empty());
  CHECK(j["elapsed_s"].num() > 0);
  CHECK_FALSE(j["cancelled"].flag());
  REQUIRE(j["results"].items.size() == 2);
  const Json& first = j["results"][0];
  CHECK(first["problem"].str() == "softmax f32 rows=8 cols=256");
  CHECK(first["key"].str() == problem_key(suite.problems[0].parsed.problem));
  CHECK(first["origin"].str() == "a \"quoted\" \\ origin\nline 2");
  CHECK(j["results"][1]["origin"].is_null());
  const std::string winner = first["winner"].str();
  CHECK(winner.rfind("speeds.", 0) == 0);
  CHECK(first["median_s"].num() > 0);
  CHECK(first["runner_up"].str().rfind("speeds.", 0) == 0);
  CHECK(first["margin"].num() >= 0);
  CHECK(first["kept_incumbent"].kind == Json::Kind::boolean);
  CHECK(first["notes"].kind == Json::Kind::array);
  bool winner_listed = false;
  for (const Json& c : first["candidates"].items) {
    CAPTURE(c["kernel"].str());
    CHECK_FALSE(c["status"].str().empty());
    if (c["kernel"].str() == "reference.softmax") {  // excluded: never verified, never timed
      CHECK(c["verdict"].is_null());
      CHECK(c["median_s"].is_null());
      CHECK(c["samples"].num() == 0);
    }
    if (c["kernel"].str() == winner) {
      winner_listed = true;
      CHECK(c["status"].str() == "measured");
      CHECK(c["verdict"].str().rfind("passed", 0) == 0);
      CHECK(c["p20_s"].num() <= c["median_s"].num());
      CHECK(c["median_s"].num() <= c["p80_s"].num());
      CHECK(c["samples"].num() >= 20);
    }
  }
  CHECK(winner_listed);

  // Tuned again into the same file: its entries are the incumbents, and stay whole.
  const TuneRun again = tune_problems(*context, suite.problems, request);
  CHECK(again.results.size() == 2);
  CHECK(load_table_file(other).entries().size() == 2);
}

TEST_CASE("tune_problems: into the context's own table (at once in its index), reported only, or cancelled") {
  test::TempDir dir;
  const std::string own = dir.file("own.toml");
  const auto context = speeds_context("[table]\npath = \"" + own + "\"\n");
  const std::vector<SuiteProblem> problems = problems_of({"softmax f32 rows=2 cols=128", "softmax f32 rows=2 cols=96"});
  const TuneRun run = tune_problems(*context, problems, {});
  CHECK(run.table == own);
  CHECK(load_table_file(own).entries().size() == 2);
  REQUIRE(context->table() != nullptr);
  CHECK(context->table()->lookup(problem_key(problems[1].parsed.problem)).has_value());

  TuneRequest nowhere;
  nowhere.table_path = "";
  size_t calls = 0;
  nowhere.progress = [&](size_t done, size_t, double) {
    ++calls;
    return done < 1;  // stop after the first problem
  };
  const auto fresh = speeds_context();
  const TuneRun cancelled = tune_problems(*fresh, problems, nowhere);
  CHECK(calls == 2);
  CHECK(cancelled.cancelled);
  CHECK(cancelled.results.size() == 1);
  const Json j = JsonReader::parse(tuning_json(cancelled));
  CHECK(j["table"].is_null());
  CHECK(j["cancelled"].flag());
  CHECK(j["results"].items.size() == 1);
}

TEST_CASE("tune_problems: an unusable table fails before any tuning, with ARB_ERR_TABLE") {
  test::TempDir dir;
  const std::string corrupt = dir.file("corrupt.toml");
  std::ofstream(corrupt) << "this is = = not a table\n";
  const auto context = speeds_context("[table]\npath = \"" + corrupt + "\"\n");
  REQUIRE_FALSE(context->table_error().empty());
  const std::vector<SuiteProblem> problems = problems_of({"softmax f32 rows=2 cols=64"});
  size_t calls = 0;
  TuneRequest request;
  request.progress = [&](size_t, size_t, double) { return ++calls, true; };
  CHECK(status_of([&] { tune_problems(*context, problems, request); }) == ARB_ERR_TABLE);  // its own table
  request.table_path = corrupt;
  CHECK(status_of([&] { tune_problems(*context, problems, request); }) == ARB_ERR_TABLE);  // named
  request.table_path = dir.path;  // a folder
  CHECK(status_of([&] { tune_problems(*context, problems, request); }) == ARB_ERR_TABLE);
  std::ofstream(dir.file("plain")) << "";
  request.table_path = dir.file("plain") + "/sub/table.toml";  // under a file
  CHECK(status_of([&] { tune_problems(*context, problems, request); }) == ARB_ERR_TABLE);
  CHECK(calls == 0);
  request.table_path = "";  // reported only: the broken table does not matter
  CHECK(tune_problems(*context, problems, request).results.size() == 1);
}
