// Every CUDA kernel that ops launch early (cuda::launch, programmatic dependent launch) must
// wait for the kernel ahead before it reads anything: its body calls cuda::start_kernel() or
// cuda::wait_for_inputs(). A kernel missing it reads half-written inputs only now and then, so
// this reads the kernels' source and names any that forget. Kernels launched plainly
// (`<<<...>>>`, which waits for the stream) need no wait.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace lockstep {
namespace {

// The kernels in `source` that neither wait nor are launched plainly.
std::vector<std::string> kernels_without_a_wait(const std::string& source) {
  std::vector<std::string> missing;
  for (size_t at = source.find("__global__"); at != std::string::npos; at = source.find("__global__", at + 1)) {
    const size_t open = source.find('{', at);
    if (open == std::string::npos) break;
    std::string head = source.substr(at, open - at);
    const size_t paren = head.find('(', head.find("__launch_bounds__") == std::string::npos
                                            ? 0
                                            : head.find(')', head.find("__launch_bounds__")) + 1);
    // The kernel's name: the identifier just before its parameter list.
    size_t end = paren;
    while (end > 0 && std::isspace(static_cast<unsigned char>(head[end - 1]))) --end;
    size_t begin = end;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(head[begin - 1])) || head[begin - 1] == '_')) --begin;
    const std::string name = head.substr(begin, end - begin);
    size_t close = open;
    for (int depth = 0; close < source.size(); ++close) {
      if (source[close] == '{') ++depth;
      if (source[close] == '}' && --depth == 0) break;
    }
    const std::string body = source.substr(open, close - open);
    const bool waits = body.find("start_kernel()") != std::string::npos ||
                       body.find("wait_for_inputs()") != std::string::npos;
    const bool plain = source.find(name + "<<<") != std::string::npos;
    if (!waits && !plain) missing.push_back(name);
  }
  return missing;
}

TEST(KernelWaits, TheCheckFindsAKernelThatForgets) {
  const std::string source = R"(
__global__ void waits_kernel(const float* x) { cuda::start_kernel(); }
__global__ void __launch_bounds__(256) late_kernel(float* x) { cuda::allow_early_launch(); x[0] = 1; }
__global__ void plain_kernel(float* x) { x[0] = 1; }
void go() { plain_kernel<<<1, 1>>>(nullptr); }
)";
  EXPECT_EQ(kernels_without_a_wait(source), std::vector<std::string>{"late_kernel"});
}

TEST(KernelWaits, EveryEarlyLaunchedKernelWaitsForTheOneAhead) {
  const std::filesystem::path folder = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "src" / "backend" / "cuda";
  int kernels = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (size_t at = source.find("__global__"); at != std::string::npos; at = source.find("__global__", at + 1))
      ++kernels;
    EXPECT_EQ(kernels_without_a_wait(source), std::vector<std::string>{}) << entry.path();
  }
  EXPECT_GT(kernels, 20) << "no kernels found under " << folder;
}

}  // namespace
}  // namespace lockstep
