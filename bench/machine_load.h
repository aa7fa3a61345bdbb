// How much of the machine other processes used while a benchmark ran. On a small shared machine
// one busy neighbour halves the bandwidth and stalls the pool's static split, so a benchmark
// reports this beside its numbers rather than silently printing slow ones. Linux only: elsewhere
// the load reads as unknown.
#pragma once

#include <cstdint>
#include <cstdio>

namespace lockstep::bench {

struct CpuSample {
  uint64_t machine_busy = 0;   // jiffies every CPU spent not idle
  uint64_t machine_total = 0;  // jiffies every CPU spent, idle or not
  uint64_t own = 0;            // jiffies this process spent (user + system)
  bool valid = false;
};

inline CpuSample sample_cpu() {
  CpuSample sample;
  if (FILE* stat = std::fopen("/proc/stat", "r")) {
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    if (std::fscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait, &irq,
                    &softirq, &steal) == 8) {
      sample.machine_busy = user + nice + system + irq + softirq + steal;
      sample.machine_total = sample.machine_busy + idle + iowait;
      sample.valid = true;
    }
    std::fclose(stat);
  }
  if (FILE* self = std::fopen("/proc/self/stat", "r")) {
    // Fields 14 and 15 are utime and stime; the command name (field 2) holds no spaces here.
    unsigned long long utime = 0, stime = 0;
    if (std::fscanf(self, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2)
      sample.own = utime + stime;
    else
      sample.valid = false;
    std::fclose(self);
  }
  return sample;
}

// The share of all CPUs' time between two samples that other processes used, in [0, 1];
// negative when unknown.
inline double foreign_load(const CpuSample& before, const CpuSample& after) {
  if (!before.valid || !after.valid || after.machine_total <= before.machine_total) return -1.0;
  double busy = double(after.machine_busy - before.machine_busy);
  double own = double(after.own - before.own);
  double foreign = (busy - own) / double(after.machine_total - before.machine_total);
  return foreign < 0.0 ? 0.0 : foreign;
}

// One line for the end of a benchmark's output, with a warning when the numbers are suspect.
inline void print_foreign_load(const CpuSample& before, const CpuSample& after) {
  double load = foreign_load(before, after);
  if (load < 0.0) {
    std::printf("other processes' CPU use during the run: unknown\n");
    return;
  }
  std::printf("other processes' CPU use during the run: %.0f%% of all CPUs%s\n", 100.0 * load,
              load > 0.05 ? " -- WARNING: the machine was not quiet; numbers are unreliable" : "");
}

}  // namespace lockstep::bench
