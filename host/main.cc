// fleet-host: argv -> command -> exit code. Everything else lives in fleet_host_lib.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  // A peer that goes away must surface as an error on the socket that wrote to it (stores,
  // communicators, transports), not kill the process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  return fleet::RunCli(args, std::cout, std::cerr);
}
