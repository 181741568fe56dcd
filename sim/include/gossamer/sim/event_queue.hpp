#pragma once
/// The simulator's event queue: events ordered by virtual time, ties broken by the order in
/// which they were pushed, so that the same inputs always give the same sequence.
///
/// The heap holds only (time, sequence, slot); events stay in a slot array and move exactly
/// twice (in and out), however deep the heap.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace gossamer::sim {

template <typename Event>
class EventQueue {
  public:
    void push(double time, Event e) {
        std::uint32_t slot;
        if (free_.empty()) {
            slot = static_cast<std::uint32_t>(slots_.size());
            slots_.emplace_back(std::move(e));
        } else {
            slot = free_.back();
            free_.pop_back();
            slots_[slot].emplace(std::move(e));
        }
        heap_.push_back(Key{time, next_++, slot});
        std::push_heap(heap_.begin(), heap_.end(), Later{});
    }
    bool empty() const { return heap_.empty(); }
    std::size_t size() const { return heap_.size(); }
    double next_time() const { return heap_.front().time; }
    /// Removes and returns the earliest event (the first pushed among equal times).
    std::pair<double, Event> pop() {
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        const Key key = heap_.back();
        heap_.pop_back();
        std::pair<double, Event> out{key.time, std::move(*slots_[key.slot])};
        slots_[key.slot].reset();
        free_.push_back(key.slot);
        return out;
    }
    std::uint64_t pushed() const { return next_; }

  private:
    struct Key {
        double time;
        std::uint64_t seq;
        std::uint32_t slot;
    };
    struct Later {
        bool operator()(const Key& a, const Key& b) const {
            return a.time != b.time ? a.time > b.time : a.seq > b.seq;
        }
    };
    std::vector<Key> heap_;
    std::vector<std::optional<Event>> slots_;
    std::vector<std::uint32_t> free_;
    std::uint64_t next_ = 0;
};

}  // namespace gossamer::sim
