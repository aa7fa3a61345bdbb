// The lockstep subcommands. Each adds itself to the app and returns how to run it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace lockstep::cli {

struct Command {
  CLI::App* parsed_by;       // the subcommand
  std::function<int()> run;  // runs it once parsed; returns the exit code
};

Command add_bench_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_logits_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_render_command(CLI::App& app);
Command add_demo_command(CLI::App& app);

}  // namespace lockstep::cli
