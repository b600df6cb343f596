// Running one conformance suite (a GoogleTest binary) as a child process and turning its report
// (report/report.h) into rows of the kit's table.
//
// A suite may crash or hang on a broken plugin. The runner lists the suite's tests first, runs
// them with a report file, and when the process dies or goes quiet for the per-test deadline in
// the middle of a test, records that test as failed ("crashed: SIGSEGV", "timed out") and runs
// the suite again on the tests that have not run yet. So one bad kernel costs one row, not the
// rest of the suite, and the kit itself never crashes with the plugin.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet::kit {

struct SuiteInvocation {
  std::filesystem::path binary;
  std::map<std::string, std::string> env;  // set on top of this process's environment
  std::string filter = "*";                // --gtest_filter
  std::chrono::seconds test_timeout{300};  // a test silent for this long is killed
  std::filesystem::path work_dir;          // report and log files go here
};

// One row of the table: a kernel (op x dtype), a collective (x world size), a pass context, or
// a test that made no call of its own.
struct Row {
  std::string subject;
  std::string variant;   // dtype, "world N", ... ; empty for a test row
  std::string result;    // "passed", "failed", "skipped", "not provided"
  std::string reason;    // why it failed, was skipped or is not provided
  std::vector<std::string> tests;  // the tests that exercised it
  int not_provided_cases = 0;      // calls that were not provided although others were
};

struct SuiteResult {
  std::vector<Row> rows;  // sorted by subject, then variant
  int tests_run = 0;
  int restarts = 0;       // how often the suite had to be started again after a crash or hang
  std::string log;        // the suite's combined stdout and stderr, last runs appended
};

// Runs the suite; an error only when it cannot be run at all (missing binary, no tests listed).
StatusOr<SuiteResult> RunSuite(const SuiteInvocation& invocation);

}  // namespace fleet::kit
