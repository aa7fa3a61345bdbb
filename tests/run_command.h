// Runs a program as a child process and captures what it printed, for end-to-end tests.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct CommandResult {
  int exit_code = -1;    // the child's exit status; 128 + signal number when a signal ended it
  std::string out;       // everything it wrote to stdout
  std::string err;       // everything it wrote to stderr
};

// Runs `program` with `args` (no shell: each argument is passed as is, empty ones included),
// stdin closed, and waits for it to exit. Blocks the caller; safe to call from one thread at a
// time. Fails only when the child cannot be started or waited for.
[[nodiscard]] Expected<CommandResult> run_command(const std::string& program, const std::vector<std::string>& args);

// Splits text on '\n'; a final line without '\n' counts, a trailing '\n' adds no empty line.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace lockstep
