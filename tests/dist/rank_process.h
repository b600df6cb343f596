// Real processes for the distributed tests: start fleet-host with an environment, collect its
// output in a file, wait with a deadline (killing it past the deadline, so a test never hangs).
#pragma once

#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fleet::dist_test {

using Clock = std::chrono::steady_clock;

class RankProcess {
 public:
  // Starts `argv` with this process's environment plus `env` (overriding), stdout and stderr
  // both to `log`.
  RankProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              const std::filesystem::path& log)
      : log_(log) {
    std::map<std::string, std::string> merged;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      size_t eq = kv.find('=');
      if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) merged[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    start_ = Clock::now();
  }
  ~RankProcess() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  // The exit code (128 + signal for a signal), or -1 if it was still running at the deadline
  // (it is then killed).
  int Wait(std::chrono::milliseconds deadline) {
    if (done_) return code_;
    const auto until = Clock::now() + deadline;
    while (true) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        done_ = true;
        end_ = Clock::now();
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      if (Clock::now() >= until) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        done_ = true;
        end_ = Clock::now();
        code_ = -1;
        return code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Seconds from start to exit (after Wait).
  double seconds() const { return std::chrono::duration<double>(end_ - start_).count(); }

  std::string Output() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool done_ = false;
  int code_ = -1;
  Clock::time_point start_, end_;
};

}  // namespace fleet::dist_test
