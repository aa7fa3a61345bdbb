// The state-slot pool: which slot of the model's recurrent-state memory (Mamba2 conv and SSM
// state) each sequence holds. Host bookkeeping only, like KvPagePool.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace lockstep {

class StateSlotPool {
 public:
  explicit StateSlotPool(int32_t slot_count);

  int32_t slot_count() const { return slot_count_; }
  int32_t free_slots() const { return int32_t(free_.size()); }
  // A free slot, or nullopt when every slot is held. The lowest free id comes first.
  [[nodiscard]] std::optional<int32_t> acquire();
  // Gives a held slot back.
  void release(int32_t slot);

 private:
  int32_t slot_count_;
  std::vector<int32_t> free_;  // a stack, lowest id on top
};

}  // namespace lockstep
