// Running a piece of work in a forked child so that a crash or a hang in it (a third-party
// plugin's entry point, say) cannot take the caller down. The child's answer comes back as a
// string through a pipe; how the child ended comes back too.
//
// The child leads a process group of its own and dies with the thread that started it
// (PR_SET_PDEATHSIG), so nothing it starts outlives the caller: FinishIsolated kills the whole
// group before it returns, whether the child answered, crashed or ran past its deadline.
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
  // How the child ended, to follow "the plugin ": "answered", "was killed by SIGSEGV",
  // "did not finish before its deadline and was killed", "exited with code 3 without
  // answering".
  std::string Describe() const;
};

// Forks; the child runs `work`, writes the string it returns to the pipe and _exits, without
// running the parent's exit handlers. Children run in parallel until finished.
StatusOr<IsolatedChild> StartIsolated(const std::function<std::string()>& work);

// Reads the child's answer until the child exits or `deadline` passes (then it is killed and
// timed_out set), kills what is left of its process group (a process the work started and left
// running, holding the pipe or not) and reaps the child. Returns by the deadline plus the time a
// killed process takes to die; never blocks on a process that ignores the pipe.
IsolatedResult FinishIsolated(IsolatedChild child, std::chrono::steady_clock::time_point deadline);

}  // namespace fleet
