#pragma once
/// The simulator's event queue: events ordered by virtual time, ties broken by the order in
/// which they were pushed, so that the same inputs always give the same sequence.

#include <cstdint>
#include <algorithm>
#include <utility>
#include <vector>

namespace gossamer::sim {

template <typename Event>
class EventQueue {
public:
    void push(double time, Event e) {
        heap_.push_back(Item{time, next_++, std::move(e)});
        std::push_heap(heap_.begin(), heap_.end(), Later{});
    }
    bool empty() const { return heap_.empty(); }
    std::size_t size() const { return heap_.size(); }
    double next_time() const { return heap_.front().time; }
    /// Removes and returns the earliest event (the first pushed among equal times).
    std::pair<double, Event> pop() {
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        Item top = std::move(heap_.back());
        heap_.pop_back();
        return {top.time, std::move(top.event)};
    }
    std::uint64_t pushed() const { return next_; }

private:
    struct Item {
        double time;
        std::uint64_t seq;
        Event event;
    };
    struct Later {
        bool operator()(const Item& a, const Item& b) const {
            return a.time != b.time ? a.time > b.time : a.seq > b.seq;
        }
    };
    std::vector<Item> heap_;
    std::uint64_t next_ = 0;
};

}  // namespace gossamer::sim
