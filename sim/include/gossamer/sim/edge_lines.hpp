#pragma once
/// The fair network's per-edge order (the engine's, sim/src): messages of one directed edge travel
/// one after another, as over the one TCP connection of a real endpoint; only the front of an
/// edge's line is a flow, the others wait for it. An edge has a line only while a message of it
/// is in flight, so memory follows the messages in flight, not the edges ever used
/// (docs/modules/simulator.md, "Scale": a std::deque per edge ever used took about 700 bytes
/// each, 1,048,576 edges at 65,536 peers of a one-peer exponential graph).
///
/// The lines live in an open-addressing table (linear probing, backward-shift deletion: no
/// tombstones, so a long run does not slow it) keyed by from * n + to; the waiting messages in a
/// pool, each line a singly linked list of pool entries, oldest first.

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace gossamer::sim {

template <typename Item>
class EdgeLines {
  public:
    /// A message for `edge`: true when the edge was idle (the caller starts it now; the edge is
    /// busy until pop()), false when it waits behind the one in flight.
    bool push(std::uint64_t edge, const Item& item) {
        if (count_ * 2 >= slots_.size()) grow();
        std::size_t i = find(edge);
        if (slots_[i].key == kEmpty) {
            slots_[i] = Line{edge, kNone, kNone};
            ++count_;
            return true;
        }
        const std::uint32_t w = take(item);
        Line& line = slots_[i];
        if (line.tail == kNone)
            line.head = w;
        else
            pool_[line.tail].next = w;
        line.tail = w;
        return false;
    }
    /// The message in flight on `edge` is done: the next one to start, or nullptr when none
    /// waits (the edge is idle again). The pointer is valid until the next push() or pop().
    /// `edge` must be busy.
    const Item* pop(std::uint64_t edge) {
        const std::size_t i = find(edge);
        Line& line = slots_[i];
        if (line.head == kNone) {
            erase(i);
            return nullptr;
        }
        const std::uint32_t w = line.head;
        line.head = pool_[w].next;
        if (line.head == kNone) line.tail = kNone;
        free_.push_back(w);
        return &pool_[w].item;  // stays put until the slot is reused by a later push()
    }
    /// Edges with a message in flight.
    std::size_t busy() const { return count_; }

  private:
    static constexpr std::uint64_t kEmpty = std::numeric_limits<std::uint64_t>::max();
    static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    struct Line {
        std::uint64_t key = kEmpty;
        std::uint32_t head = kNone, tail = kNone;  // waiting, oldest first
    };
    struct Waiting {
        Item item;
        std::uint32_t next = kNone;
    };

    std::size_t home(std::uint64_t key) const {
        // Fibonacci hashing: consecutive ranks spread over the table.
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    // The slot holding `key`, or the empty slot where it would go.
    std::size_t find(std::uint64_t key) const {
        const std::size_t mask = slots_.size() - 1;
        std::size_t i = home(key);
        while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
        return i;
    }
    void erase(std::size_t i) {
        const std::size_t mask = slots_.size() - 1;
        std::size_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (slots_[j].key == kEmpty) break;
            const std::size_t h = home(slots_[j].key);
            // Move j back to the hole at i unless its home lies cyclically in (i, j].
            if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Line{};
        --count_;
    }
    void grow() {
        std::vector<Line> old = std::move(slots_);
        const std::size_t size = old.empty() ? 64 : old.size() * 2;
        slots_.assign(size, Line{});
        shift_ = 64;
        for (std::size_t s = size; s > 1; s >>= 1) --shift_;
        for (const Line& line : old)
            if (line.key != kEmpty) slots_[find(line.key)] = line;
    }
    std::uint32_t take(const Item& item) {
        if (free_.empty()) {
            pool_.push_back(Waiting{item, kNone});
            return static_cast<std::uint32_t>(pool_.size() - 1);
        }
        const std::uint32_t w = free_.back();
        free_.pop_back();
        pool_[w] = Waiting{item, kNone};
        return w;
    }

    std::vector<Line> slots_;  // a power of two, at most half full
    int shift_ = 64;
    std::size_t count_ = 0;
    std::vector<Waiting> pool_;
    std::vector<std::uint32_t> free_;
};

}  // namespace gossamer::sim
