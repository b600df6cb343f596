// StartIsolated / FinishIsolated: the deadline that cuts a hung plugin probe short, and the
// promise that nothing the probe started is left running afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "support/isolate.h"
#include "temp_dir.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// FinishIsolated on another thread, so that a broken deadline fails the test instead of hanging
// it: past `bound` the test kills the child's group itself to get the thread back.
IsolatedResult FinishWithin(const IsolatedChild& child, Clock::time_point deadline,
                            milliseconds bound, bool* returned_in_time) {
  std::packaged_task<IsolatedResult()> task([child, deadline] {
    return FinishIsolated(child, deadline);
  });
  std::future<IsolatedResult> done = task.get_future();
  std::thread t(std::move(task));
  *returned_in_time = done.wait_for(bound) == std::future_status::ready;
  if (!*returned_in_time) {
    ::kill(-child.pid, SIGKILL);
    ::kill(child.pid, SIGKILL);
  }
  t.join();
  return done.get();
}

pid_t ReadPid(const std::filesystem::path& file) {
  for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return -1;
}

TEST(IsolateTest, AnAnswerComesBackAndTheChildIsReaped) {
  auto child = StartIsolated([] { return std::string("hello"); });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  bool in_time = false;
  IsolatedResult r = FinishWithin(*child, Clock::now() + std::chrono::seconds(30),
                                  milliseconds(20000), &in_time);
  EXPECT_TRUE(in_time);
  EXPECT_TRUE(r.answered) << r.Describe();
  EXPECT_EQ(r.answer, "hello");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.Describe(), "answered");
  EXPECT_FALSE(Alive(child->pid));
}

TEST(IsolateTest, AHungChildIsKilledAtTheDeadlineAndReported) {
  auto child = StartIsolated([]() -> std::string {
    for (;;) ::pause();
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const auto start = Clock::now();
  bool in_time = false;
  IsolatedResult r =
      FinishWithin(*child, start + milliseconds(300), milliseconds(10000), &in_time);
  const auto took = Clock::now() - start;
  ASSERT_TRUE(in_time) << "FinishIsolated did not return long after its deadline";
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.answered);
  EXPECT_TRUE(r.answer.empty());
  EXPECT_EQ(r.signal, 0) << "the kill at the deadline is not the child's own crash";
  EXPECT_EQ(r.Describe(), "did not finish before its deadline and was killed");
  // Reaped, not a zombie: the pid is gone and is no child of ours any more.
  EXPECT_FALSE(Alive(child->pid));
  EXPECT_EQ(::waitpid(child->pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// Work that starts a process of its own (a plugin running a helper) and hangs: the helper
// goes with it at the deadline.
TEST(IsolateTest, WhatTheHungChildStartedIsKilledToo) {
  test_util::TempDir dir("fleet_isolate");
  const auto pid_file = dir.path() / "grandchild.pid";
  auto child = StartIsolated([&pid_file]() -> std::string {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    std::ofstream(pid_file) << grandchild;
    for (;;) ::pause();
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const pid_t grandchild = ReadPid(pid_file);
  ASSERT_GT(grandchild, 0);
  bool in_time = false;
  IsolatedResult r = FinishWithin(*child, Clock::now() + milliseconds(300), milliseconds(10000),
                                  &in_time);
  ASSERT_TRUE(in_time);
  EXPECT_TRUE(r.timed_out);
  // The grandchild is not ours to reap (init adopts it); give the kernel a moment to end it.
  bool gone = false;
  for (auto until = Clock::now() + std::chrono::seconds(5); !gone && Clock::now() < until;) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string line;
    // Gone, or a zombie waiting for its new parent.
    gone = !std::getline(stat, line) || line.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(gone) << "process " << grandchild << " outlived the isolated child";
  if (!gone) ::kill(grandchild, SIGKILL);
}

// A child that answers and exits while a process it started keeps the pipe open: the answer
// counts at once, and that process does not outlive the call.
TEST(IsolateTest, AnAnswerIsNotHeldHostageByALeftoverProcess) {
  test_util::TempDir dir("fleet_isolate");
  const auto pid_file = dir.path() / "grandchild.pid";
  auto child = StartIsolated([&pid_file] {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    std::ofstream(pid_file) << grandchild;
    return std::string("done");
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const auto start = Clock::now();
  bool in_time = false;
  IsolatedResult r = FinishWithin(*child, start + std::chrono::seconds(20),
                                  milliseconds(30000), &in_time);
  ASSERT_TRUE(in_time);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "waited for the leftover process";
  EXPECT_TRUE(r.answered) << r.Describe();
  EXPECT_EQ(r.answer, "done");
  const pid_t grandchild = ReadPid(pid_file);
  ASSERT_GT(grandchild, 0);
  bool gone = false;
  for (auto until = Clock::now() + std::chrono::seconds(5); !gone && Clock::now() < until;) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string line;
    gone = !std::getline(stat, line) || line.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(gone) << "process " << grandchild << " outlived the isolated child";
  if (!gone) ::kill(grandchild, SIGKILL);
}

TEST(IsolateTest, ACrashIsReportedWithItsSignal) {
  auto child = StartIsolated([]() -> std::string {
    ::raise(SIGSEGV);
    return "unreachable";
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  bool in_time = false;
  IsolatedResult r = FinishWithin(*child, Clock::now() + std::chrono::seconds(30),
                                  milliseconds(20000), &in_time);
  ASSERT_TRUE(in_time);
  EXPECT_FALSE(r.answered);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.Describe(), "was killed by SIGSEGV");
}

}  // namespace
}  // namespace fleet
