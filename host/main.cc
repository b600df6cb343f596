// fleet-host: argv -> command -> exit code. Everything else lives in fleet_host_lib.
#include <csignal>
#include <exception>
#include <iostream>
#include <ostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "support/terminal_buf.h"

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
  //
  // Everything the commands print passes through TerminalSafeBuf, so input echoed in a message
  // (an unknown option, a name from a file) cannot drive the user's terminal, whichever message
  // forgot to quote it.
  fleet::TerminalSafeBuf out_buf(std::cout.rdbuf(), std::string::npos);
  fleet::TerminalSafeBuf err_buf(std::cerr.rdbuf(), size_t{64} << 10);
  std::ostream out(&out_buf);
  std::ostream err(&err_buf);
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return fleet::RunCli(args, out, err);
  } catch (const std::bad_alloc&) {
    err << "fleet-host: out of memory" << std::endl;
  } catch (const std::exception& e) {
    err << "fleet-host: internal error: " << e.what() << std::endl;
  } catch (...) {
    err << "fleet-host: internal error: an unknown exception" << std::endl;
  }
  return 70;
}
