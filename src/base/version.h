// lockstep's version, for `lockstep --version` and GET /version.
#pragma once

namespace lockstep {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace lockstep
