// Makes a backend by name: "cpu", or "cuda" where lockstep was built with CUDA and a device
// is present. The CLI's --backend flag and the tests come through here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace lockstep {

// The names this build knows, whether or not a device is present ("cpu", and "cuda" when built).
std::vector<std::string> built_backends();

// threads: CPU threads (0: one per core); ignored by CUDA.
Expected<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads = 0);

// True when make_backend(name) would succeed on this machine.
bool backend_usable(const std::string& name);

}  // namespace lockstep
