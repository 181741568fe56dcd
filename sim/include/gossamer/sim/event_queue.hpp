#pragma once
/// The simulator's event queue: events ordered by virtual time, ties broken by the order in
/// which they were pushed, so that the same inputs always give the same sequence.
///
/// The heap holds only 16-byte keys, (time, sequence and slot packed in one word); events stay
/// in a slot array and move exactly twice (in and out), however deep the heap. Limits: 2^28
/// events queued at once and 2^36 pushed in all; past them push() throws Error.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::sim {

template <typename Event>
class EventQueue {
  public:
    static constexpr int kSlotBits = 28;
    static constexpr std::uint64_t kMaxQueued = std::uint64_t{1} << kSlotBits;
    static constexpr std::uint64_t kMaxPushed = std::uint64_t{1} << (64 - kSlotBits);

    void push(double time, Event e) {
        std::uint32_t slot;
        if (next_ >= kMaxPushed)
            throw Error(
                fmt::format("the simulator's event queue took its limit of {} events; "
                            "simulate fewer peers or steps",
                            kMaxPushed));
        if (free_.empty()) {
            if (slots_.size() >= kMaxQueued)
                throw Error(
                    fmt::format("the simulator's event queue holds its limit of {} events "
                                "at once; simulate fewer peers",
                                kMaxQueued));
            slot = static_cast<std::uint32_t>(slots_.size());
            slots_.emplace_back(std::move(e));
        } else {
            slot = free_.back();
            free_.pop_back();
            slots_[slot].emplace(std::move(e));
        }
        heap_.push_back(Key{time, (next_++ << kSlotBits) | slot});
        sift_up(heap_.size() - 1);
    }
    bool empty() const { return heap_.empty(); }
    std::size_t size() const { return heap_.size(); }
    double next_time() const { return heap_.front().time; }
    /// Removes and returns the earliest event (the first pushed among equal times).
    std::pair<double, Event> pop() {
        const Key key = heap_.front();
        heap_.front() = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) sift_down(0);
        const auto slot = static_cast<std::uint32_t>(key.order & (kMaxQueued - 1));
        std::pair<double, Event> out{key.time, std::move(*slots_[slot])};
        slots_[slot].reset();
        free_.push_back(slot);
        return out;
    }
    std::uint64_t pushed() const { return next_; }

  private:
    // The push sequence in the high bits, the slot in the low ones: `order` compares as the
    // sequence alone (sequences are unique), and a key is 16 bytes, four to a cache line.
    struct Key {
        double time;
        std::uint64_t order;
    };
    static bool earlier(const Key& a, const Key& b) {
        return a.time != b.time ? a.time < b.time : a.order < b.order;
    }
    // A 4-ary heap: half the depth of a binary one, and a node's children share a cache line
    // or two, which matters once a simulation keeps millions of events (docs/modules/simulator.md,
    // "Scale"). (time, seq) is a total order, so the pop sequence is that of any heap.
    static constexpr std::size_t kArity = 4;
    void sift_up(std::size_t i) {
        const Key k = heap_[i];
        while (i > 0) {
            const std::size_t parent = (i - 1) / kArity;
            if (!earlier(k, heap_[parent])) break;
            heap_[i] = heap_[parent];
            i = parent;
        }
        heap_[i] = k;
    }
    void sift_down(std::size_t i) {
        const Key k = heap_[i];
        const std::size_t n = heap_.size();
        for (;;) {
            const std::size_t first = i * kArity + 1;
            if (first >= n) break;
            std::size_t best = first;
            const std::size_t last = std::min(first + kArity, n);
            for (std::size_t c = first + 1; c < last; ++c)
                if (earlier(heap_[c], heap_[best])) best = c;
            if (!earlier(heap_[best], k)) break;
            heap_[i] = heap_[best];
            i = best;
        }
        heap_[i] = k;
    }
    std::vector<Key> heap_;
    std::vector<std::optional<Event>> slots_;
    std::vector<std::uint32_t> free_;
    std::uint64_t next_ = 0;
};

}  // namespace gossamer::sim
