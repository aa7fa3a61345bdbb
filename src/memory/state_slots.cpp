#include "memory/state_slots.h"

namespace lockstep {

StateSlotPool::StateSlotPool(int32_t slot_count) : slot_count_(slot_count) {
  for (int32_t id = slot_count - 1; id >= 0; --id) free_.push_back(id);
}

std::optional<int32_t> StateSlotPool::acquire() {
  if (free_.empty()) return std::nullopt;
  int32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void StateSlotPool::release(int32_t slot) { free_.push_back(slot); }

}  // namespace lockstep
