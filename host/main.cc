// fleet-host: argv -> command -> exit code. Everything else lives in fleet_host_lib.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return fleet::RunCli(args, std::cout, std::cerr);
}
