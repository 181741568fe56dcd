#pragma once
/// A sliding window for per-neighbour protocol state at simulator scale.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

namespace gossamer::proto {

/// The last `capacity` values pushed (a sliding window), oldest first. The buffer grows as the
/// window fills (4, 8, ... then the capacity), so a window that sees few values holds little,
/// and the object is 16 bytes (at most 65,535 values). A simulated async job keeps two of these
/// per neighbour of each of its peers (docs/modules/simulator.md, "Scale"); dpsgd and choco keep
/// one per edge (RecentSends).
template <class T>
class GrowingWindow {
  public:
    static constexpr std::size_t kMaxCapacity = 0xFFFF;

    GrowingWindow() = default;
    explicit GrowingWindow(std::size_t capacity) { set_capacity(capacity); }
    /// Empties the window and sets its capacity; throws std::length_error past kMaxCapacity.
    void set_capacity(std::size_t capacity) {
        if (capacity > kMaxCapacity) throw std::length_error("GrowingWindow: capacity past 65535");
        capacity_ = static_cast<Index>(capacity);
        buf_.reset();
        alloc_ = size_ = head_ = 0;
    }
    std::size_t size() const noexcept { return size_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool empty() const noexcept { return size_ == 0; }
    /// Adds v; when full, the oldest value goes.
    void push_back(const T& v) {
        if (capacity_ == 0) return;
        if (size_ == alloc_ && alloc_ < capacity_) grow();
        if (size_ < capacity_) {
            buf_[(head_ + size_++) % alloc_] = v;
        } else {
            buf_[head_] = v;
            head_ = static_cast<Index>((head_ + 1) % alloc_);
        }
    }
    /// Drops the oldest value (the window must not be empty).
    void pop_front() {
        head_ = static_cast<Index>((head_ + 1) % alloc_);
        --size_;
    }
    /// i-th oldest (0 = the oldest).
    const T& operator[](std::size_t i) const { return buf_[(head_ + i) % alloc_]; }
    T& operator[](std::size_t i) { return buf_[(head_ + i) % alloc_]; }
    const T& front() const { return (*this)[0]; }
    const T& back() const { return (*this)[size_ - 1]; }

    GrowingWindow(GrowingWindow&& o) noexcept
        : buf_(std::move(o.buf_)),
          capacity_(o.capacity_),
          alloc_(std::exchange(o.alloc_, Index{0})),
          size_(std::exchange(o.size_, Index{0})),
          head_(std::exchange(o.head_, Index{0})) {}
    GrowingWindow& operator=(GrowingWindow&& o) noexcept {
        buf_ = std::move(o.buf_);
        capacity_ = o.capacity_;
        alloc_ = std::exchange(o.alloc_, Index{0});
        size_ = std::exchange(o.size_, Index{0});
        head_ = std::exchange(o.head_, Index{0});
        return *this;
    }
    GrowingWindow(const GrowingWindow& o)
        : capacity_(o.capacity_), alloc_(o.alloc_), size_(o.size_), head_(o.head_) {
        if (o.buf_) {
            buf_ = std::make_unique<T[]>(alloc_);
            std::copy(o.buf_.get(), o.buf_.get() + alloc_, buf_.get());
        }
    }
    GrowingWindow& operator=(const GrowingWindow& o) {
        if (this != &o) *this = GrowingWindow(o);
        return *this;
    }

  private:
    using Index = std::uint16_t;
    void grow() {
        // Doubling, except that a last step of less than half the buffer goes to the capacity
        // at once (17 = rate_window + 1: 4, 8, 17).
        std::size_t next = std::max<std::size_t>(4, std::size_t{alloc_} * 2);
        if (next > capacity_ || capacity_ - next < next / 2) next = capacity_;
        auto b = std::make_unique<T[]>(next);
        for (std::size_t i = 0; i < size_; ++i) b[i] = std::move((*this)[i]);
        buf_ = std::move(b);
        alloc_ = static_cast<Index>(next);
        head_ = 0;
    }
    std::unique_ptr<T[]> buf_;
    Index capacity_ = 0, alloc_ = 0, size_ = 0, head_ = 0;
};

}  // namespace gossamer::proto
