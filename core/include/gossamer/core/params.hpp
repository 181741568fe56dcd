#pragma once
/// The flat parameter vector every model, optimizer and protocol works on.
///
/// One contiguous float32 buffer, 64-byte aligned (a cache line; enough for AVX-512 loads), so
/// that mixing, compression and the transport can treat a model as one array and a partition as
/// one contiguous slice of it.

#include <cstddef>
#include <memory>
#include <span>

namespace gossamer {

/// An owning, aligned, zero-initialised float32 buffer. Copies are deep; moves are O(1).
/// Not thread-safe (like std::vector): one writer at a time.
class ParamVector {
  public:
    /// Alignment of data() in bytes.
    static constexpr std::size_t alignment = 64;

    ParamVector() = default;
    /// `count` zeros. Throws std::bad_alloc when the memory is not available.
    explicit ParamVector(std::size_t count);
    ParamVector(const ParamVector& other);
    ParamVector& operator=(const ParamVector& other);
    ParamVector(ParamVector&& other) noexcept;
    ParamVector& operator=(ParamVector&& other) noexcept;
    ~ParamVector() = default;

    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    /// The first element (64-byte aligned), or null when empty.
    float* data() noexcept { return data_.get(); }
    const float* data() const noexcept { return data_.get(); }

    float& operator[](std::size_t i) noexcept { return data_[i]; }
    float operator[](std::size_t i) const noexcept { return data_[i]; }

    /// The whole vector as a view; valid until this vector is resized, reassigned or destroyed.
    std::span<float> span() noexcept { return {data(), size_}; }
    std::span<const float> span() const noexcept { return {data(), size_}; }
    operator std::span<float>() noexcept { return span(); }
    operator std::span<const float>() const noexcept { return span(); }

    /// Elements [offset, offset + count); throws std::out_of_range past the end.
    std::span<float> slice(std::size_t offset, std::size_t count);
    std::span<const float> slice(std::size_t offset, std::size_t count) const;

    /// Sets every element to `value`.
    void fill(float value) noexcept;

  private:
    struct Free {
        void operator()(float* p) const noexcept;
    };
    std::unique_ptr<float[], Free> data_;
    std::size_t size_ = 0;
};

/// True when two vectors have the same size and bit-identical contents (NaNs compare by bits).
bool bitwise_equal(std::span<const float> a, std::span<const float> b) noexcept;

}  // namespace gossamer
