// Running a piece of work in a forked child so that a crash or a hang in it (a third-party
// plugin's entry point, say) cannot take the caller down. The child's answer comes back as a
// string through a pipe; how the child ended comes back too.
//
// Call only while the process has a single thread: fork() copies just the calling thread, so
// work that needs a lock another thread held would deadlock in the child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "support/status.h"

namespace fleet {

struct IsolatedChild {
  pid_t pid = -1;
  int fd = -1;  // read end of the child's answer
};

struct IsolatedResult {
  bool answered = false;  // the child wrote its answer and exited 0
  std::string answer;     // what `work` returned (at most 16 MiB)
  int signal = 0;         // the signal that ended the child, if one did
  int exit_code = -1;     // its exit code, if it exited
  bool timed_out = false; // killed at the deadline
  // "killed by SIGSEGV", "timed out after 10 s and was killed", "exited with code 3".
  std::string Describe() const;
};

// Forks; the child runs `work`, writes the string it returns to the pipe and _exits, without
// running the parent's exit handlers. Children run in parallel until finished.
StatusOr<IsolatedChild> StartIsolated(const std::function<std::string()>& work);

// Reads the child's answer and reaps it; kills it at `deadline`.
IsolatedResult FinishIsolated(IsolatedChild child, std::chrono::steady_clock::time_point deadline);

}  // namespace fleet
