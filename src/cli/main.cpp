#include <CLI/CLI.hpp>
#include <iostream>
#include <new>
#include <vector>

#include "base/version.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"lockstep: an exact, batch-invariant LLM inference server"};
  app.require_subcommand(0, 1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.set_version_flag("--version", std::string("lockstep ") + lockstep::kVersion);
  std::vector<lockstep::cli::Command> commands = {
      lockstep::cli::add_bench_command(app),
      lockstep::cli::add_generate_command(app),
      lockstep::cli::add_logits_command(app),
      lockstep::cli::add_serve_command(app),
      lockstep::cli::add_tokenize_command(app),
      lockstep::cli::add_render_command(app),
      lockstep::cli::add_demo_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::cerr << "lockstep: error: " << error.what() << "\n";
    return 2;
  }
  if (app.get_subcommands().empty()) {  // `lockstep` alone: what it can do
    std::cout << app.help();
    return 0;
  }
  try {
    for (const auto& command : commands)
      if (command.parsed_by->parsed()) return command.run();
  } catch (const std::bad_alloc& e) {
    // Models plan their memory at load; this is the net under everything else.
    std::cerr << "lockstep: error: out of memory (" << e.what() << ")\n";
    return 1;
  }
  return 2;
}
