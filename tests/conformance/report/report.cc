#include "report/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fleet::conformance {
namespace {

class ReportFile {
 public:
  static ReportFile& Get() {
    static ReportFile file;
    return file;
  }
  bool enabled() const { return fd_ >= 0; }

  // One line, one write: O_APPEND keeps concurrent writers' lines whole.
  void Write(const nlohmann::json& event) {
    if (fd_ < 0) return;
    std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    std::lock_guard<std::mutex> lock(mu_);
    size_t done = 0;
    while (done < line.size()) {
      ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n <= 0) return;  // a report that cannot be written is not worth failing a test for
      done += static_cast<size_t>(n);
    }
  }

  std::string current_test() {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  void set_current_test(std::string name) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(name);
  }

 private:
  ReportFile() {
    const char* path = std::getenv("FLEET_CONFORMANCE_REPORT");
    if (path != nullptr && *path != '\0') {
      fd_ = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    }
  }
  int fd_ = -1;
  std::mutex mu_;
  std::string current_;
};

std::string TestName(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

class ReportListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    ReportFile::Get().set_current_test(TestName(info));
    ReportFile::Get().Write({{"event", "begin"}, {"test", TestName(info)}});
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::string where = result.file_name() != nullptr ? result.file_name() : "";
    if (!where.empty()) where += ":" + std::to_string(result.line_number());
    ReportFile::Get().Write({{"event", "failure"},
                             {"test", ReportFile::Get().current_test()},
                             {"where", where},
                             {"message", result.message()}});
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult& r = *info.result();
    std::string result = r.Failed() ? "failed" : (r.Skipped() ? "skipped" : "passed");
    std::string message;
    if (r.Skipped()) {
      for (int i = 0; i < r.total_part_count(); ++i) {
        if (r.GetTestPartResult(i).skipped()) message = r.GetTestPartResult(i).message();
      }
    }
    ReportFile::Get().Write(
        {{"event", "end"}, {"test", TestName(info)}, {"result", result}, {"message", message}});
    ReportFile::Get().set_current_test("");
  }
};

// Installed before main: gtest_main's RUN_ALL_TESTS then reports through it.
const bool kInstalled = [] {
  if (ReportFile::Get().enabled()) {
    ::testing::UnitTest::GetInstance()->listeners().Append(new ReportListener());
  }
  return true;
}();

}  // namespace

void ReportRun(const std::string& subject, const std::string& variant, const char* result,
               const std::string& message) {
  ReportFile& file = ReportFile::Get();
  if (!file.enabled()) return;
  file.Write({{"event", "run"},
              {"test", file.current_test()},
              {"subject", subject},
              {"variant", variant},
              {"result", result},
              {"message", message}});
}

}  // namespace fleet::conformance
