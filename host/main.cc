// fleet-host: argv -> command -> exit code. Everything else lives in fleet_host_lib.
#include <csignal>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  // A peer that goes away must surface as an error on the socket that wrote to it (stores,
  // communicators, transports), not kill the process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // Likewise a file-size limit (ulimit -f, a quota enforced that way) must fail the write with
  // EFBIG, which every writer reports and cleans up after, not kill the process mid-checkpoint
  // and leave its temporary files behind.
  std::signal(SIGXFSZ, SIG_IGN);
  // The boundary of last resort: an exception that escaped every layer (a bug, or an
  // allocation the input sized past what the machine has) ends in a message and exit code 70
  // (EX_SOFTWARE), not in std::terminate's abort and core dump.
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return fleet::RunCli(args, std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "fleet-host: out of memory" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "fleet-host: internal error: " << e.what() << std::endl;
  } catch (...) {
    std::cerr << "fleet-host: internal error: an unknown exception" << std::endl;
  }
  return 70;
}
