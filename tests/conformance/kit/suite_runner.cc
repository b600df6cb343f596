#include "suite_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

extern char** environ;

namespace fleet::kit {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A message on one line, cut to a table cell. GoogleTest's "Value of: ... Actual: ...
// Expected: ..." lines are kept: the reason a test streamed usually comes after them.
std::string Brief(const std::string& message) {
  std::string line;
  for (char c : message) {
    if (c == '\n') {
      if (!line.empty() && line.back() != ' ') line += ' ';
    } else {
      line += c;
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

struct Child {
  int exit_code = -1;   // when it exited
  int signal = 0;       // when a signal ended it
  bool timed_out = false;
};

// Runs argv with `env` added, stdout and stderr appended to `log`. Kills the process group when
// the report file has not grown for `quiet` (a hung test).
StatusOr<Child> Spawn(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env, const fs::path& log,
                      const fs::path& report, std::chrono::seconds quiet) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) env_strings.push_back(std::move(kv));
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) return Internal("cannot open " + log.string() + ": " + std::strerror(errno));
  const pid_t kit = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Its own group keeps Ctrl-C from reaching it, so it must die with the kit: a suite hung in a
    // plugin would otherwise run on forever after the kit was stopped.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != kit) ::_exit(127);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(log_fd);
  ::setpgid(pid, pid);

  Child child;
  off_t last_size = -1;
  Clock::time_point last_growth = Clock::now();
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFEXITED(status)) child.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) child.signal = WTERMSIG(status);
      // Threads a crashed suite left in its group (rank threads are in-process; helper
      // processes would not be) are gone with it; make sure nothing outlives the run.
      ::kill(-pid, SIGKILL);
      return child;
    }
    struct stat st{};
    const off_t size = ::stat(report.c_str(), &st) == 0 ? st.st_size : 0;
    if (size != last_size) {
      last_size = size;
      last_growth = Clock::now();
    } else if (Clock::now() - last_growth > quiet) {
      child.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return child;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The tests of a GoogleTest binary under `filter`, as "Suite.Name" (parameterised ones too).
StatusOr<std::vector<std::string>> ListTests(const SuiteInvocation& inv) {
  const fs::path out = inv.work_dir / "list.txt";
  const fs::path none = inv.work_dir / "list.report";
  FLEET_ASSIGN_OR_RETURN(Child c, Spawn({inv.binary.string(), "--gtest_list_tests",
                                         "--gtest_filter=" + inv.filter},
                                        inv.env, out, none, std::chrono::seconds(60)));
  const std::string text = ReadAll(out);
  if (c.exit_code != 0) {
    return Internal(inv.binary.string() + " --gtest_list_tests failed: " + Brief(text));
  }
  std::vector<std::string> tests;
  std::string suite;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      suite = line.substr(0, line.find_first_of(" #"));
      continue;
    }
    std::string name = line.substr(line.find_first_not_of(' '));
    name = name.substr(0, name.find_first_of(" #"));
    if (!suite.empty() && !name.empty()) tests.push_back(suite + name);
  }
  return tests;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// What the report says about each subject x variant, before it becomes a Row.
struct Tally {
  std::string subject, variant;
  int ok = 0, errors = 0, not_provided = 0;
  std::string not_provided_reason;
  std::vector<std::string> failures;
  std::set<std::string> tests;
  // Test rows only (no call of their own):
  std::string test_result;
  std::string test_reason;
};

struct TestState {
  std::string last_key;     // the most recent call's key in this test
  std::string last_result;  // and its result
  std::vector<std::string> keys;
};

class Aggregator {
 public:
  explicit Aggregator(std::map<std::string, Tally>& tallies) : tallies_(tallies) {}

  void Begin(const std::string& test) { states_[test] = TestState{}; }

  void Run(const std::string& test, const std::string& subject, const std::string& variant,
           const std::string& result, const std::string& message) {
    const std::string key = subject + '\x1f' + variant;
    Tally& t = tallies_[key];
    t.subject = subject;
    t.variant = variant;
    t.tests.insert(test);
    if (result == "ok") ++t.ok;
    if (result == "error") ++t.errors;
    if (result == "not_provided") {
      ++t.not_provided;
      if (t.not_provided_reason.empty()) {
        // "Unimplemented: not provided: no kernel for ..." reads as "no kernel for ...".
        const size_t at = message.find("not provided: ");
        t.not_provided_reason = Brief(at == std::string::npos ? message : message.substr(at + 14));
      }
    }
    TestState& s = states_[test];
    s.last_key = key;
    s.last_result = result;
    s.keys.push_back(key);
  }

  // A failure belongs to the call just before it. After a call the plugin does not provide, a
  // failure is its consequence (the test could not go on), not a fault of anything provided.
  void Failure(const std::string& test, const std::string& message) {
    const TestState& s = states_[test];
    if (s.last_key.empty()) {
      TestRow(test).failures.push_back(message);
    } else if (s.last_result != "not_provided") {
      tallies_[s.last_key].failures.push_back(message);
    }
  }

  void End(const std::string& test, const std::string& result, const std::string& message) {
    TestState& s = states_[test];
    if (s.keys.empty() || result == "skipped") {
      Tally& t = TestRow(test);
      t.test_result = result;
      if (result == "skipped") t.test_reason = Brief(message);
    }
  }

 private:
  Tally& TestRow(const std::string& test) {
    Tally& t = tallies_[test + '\x1f'];
    t.subject = test;
    t.tests.insert(test);
    return t;
  }
  std::map<std::string, Tally>& tallies_;
  std::map<std::string, TestState> states_;
};

Row ToRow(const Tally& t) {
  Row r;
  r.subject = t.subject;
  r.variant = t.variant;
  r.tests.assign(t.tests.begin(), t.tests.end());
  if (!t.failures.empty()) {
    r.result = "failed";
    r.reason = Brief(t.failures.front());
  } else if (!t.test_result.empty() && t.ok + t.errors + t.not_provided == 0) {
    r.result = t.test_result;
    r.reason = t.test_reason;
  } else if (t.ok + t.errors == 0 && t.not_provided > 0) {
    r.result = "not provided";
    r.reason = t.not_provided_reason;
  } else if (t.test_result == "skipped") {
    r.result = "skipped";
    r.reason = t.test_reason;
  } else {
    r.result = "passed";
    r.not_provided_cases = t.not_provided;
    if (t.not_provided > 0) {
      r.reason =
          std::to_string(t.not_provided) + " case(s) not provided: " + t.not_provided_reason;
    }
  }
  return r;
}

struct ReportParse {
  std::vector<std::string> ended;  // tests with an "end" event
  std::string open_test;           // a test that began and did not end ("" if none)
};

// Feeds one report file into the aggregator; returns the tests that ended and the one left open.
ReportParse Feed(const std::string& text, Aggregator& agg) {
  ReportParse parse;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object()) continue;  // a line torn by a kill: skip it
    const std::string event = e.value("event", "");
    const std::string test = e.value("test", "");
    if (event == "begin") {
      agg.Begin(test);
      parse.open_test = test;
    } else if (event == "run") {
      agg.Run(test, e.value("subject", ""), e.value("variant", ""), e.value("result", ""),
              e.value("message", ""));
    } else if (event == "failure") {
      std::string where = e.value("where", "");
      agg.Failure(test, e.value("message", "") + (where.empty() ? "" : " (" + where + ")"));
    } else if (event == "end") {
      agg.End(test, e.value("result", ""), e.value("message", ""));
      parse.ended.push_back(test);
      if (parse.open_test == test) parse.open_test.clear();
    }
  }
  return parse;
}

}  // namespace

StatusOr<SuiteResult> RunSuite(const SuiteInvocation& inv) {
  if (::access(inv.binary.c_str(), X_OK) != 0) {
    return NotFound("conformance suite " + inv.binary.string() + " is missing or not executable");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<std::string> remaining, ListTests(inv));
  if (remaining.empty()) return NotFound("no test of " + inv.binary.string() + " matches '" +
                                         inv.filter + "'");
  SuiteResult result;
  std::map<std::string, Tally> tallies;
  Aggregator agg(tallies);
  const fs::path log = inv.work_dir / "suite.log";
  for (int round = 0; !remaining.empty(); ++round) {
    const fs::path report = inv.work_dir / ("report." + std::to_string(round) + ".jsonl");
    std::map<std::string, std::string> env = inv.env;
    env["FLEET_CONFORMANCE_REPORT"] = report.string();
    std::string filter;
    for (const std::string& t : remaining) filter += (filter.empty() ? "" : ":") + t;
    FLEET_ASSIGN_OR_RETURN(Child child,
                           Spawn({inv.binary.string(), "--gtest_filter=" + filter}, env, log,
                                 report, inv.test_timeout));
    ReportParse parse = Feed(ReadAll(report), agg);
    std::set<std::string> done(parse.ended.begin(), parse.ended.end());
    if (!parse.open_test.empty()) {
      // The process died or hung inside this test.
      std::string why = child.timed_out
                            ? "timed out: no progress for " +
                                  std::to_string(inv.test_timeout.count()) + " s (killed)"
                            : child.signal != 0 ? "crashed: " + SignalName(child.signal)
                                                : "the suite exited (" +
                                                      std::to_string(child.exit_code) +
                                                      ") in the middle of this test";
      agg.Failure(parse.open_test, why);
      agg.End(parse.open_test, "failed", "");
      done.insert(parse.open_test);
    }
    result.tests_run += static_cast<int>(done.size());
    std::vector<std::string> next;
    for (const std::string& t : remaining) {
      if (done.count(t) == 0) next.push_back(t);
    }
    if (next.size() == remaining.size()) {
      // No progress at all: the suite dies before its first test (a plugin that crashes on
      // load, a missing library). Report it instead of looping.
      const std::string why = child.signal != 0 ? "crashed before running a test: " +
                                                      SignalName(child.signal)
                                                : "exited (" + std::to_string(child.exit_code) +
                                                      ") before running a test";
      for (const std::string& t : next) {
        agg.Begin(t);
        agg.Failure(t, why + "; see the suite's log");
        agg.End(t, "failed", "");
      }
      result.tests_run += static_cast<int>(next.size());
      break;
    }
    if (!next.empty()) ++result.restarts;
    remaining = std::move(next);
  }
  for (const auto& [key, tally] : tallies) result.rows.push_back(ToRow(tally));
  std::sort(result.rows.begin(), result.rows.end(), [](const Row& a, const Row& b) {
    // Calls first (op x dtype, collective x world), then the rows of tests without calls.
    return std::make_tuple(a.variant.empty(), a.subject, a.variant) <
           std::make_tuple(b.variant.empty(), b.subject, b.variant);
  });
  result.log = ReadAll(log);
  return result;
}

}  // namespace fleet::kit
