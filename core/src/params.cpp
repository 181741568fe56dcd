#include "gossamer/core/params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace gossamer {
namespace {

float* allocate(std::size_t count) {
    if (count == 0) return nullptr;
    void* p = ::operator new[](count * sizeof(float), std::align_val_t{ParamVector::alignment});
    return static_cast<float*>(p);
}

}  // namespace

void ParamVector::Free::operator()(float* p) const noexcept {
    ::operator delete[](p, std::align_val_t{ParamVector::alignment});
}

ParamVector::ParamVector(std::size_t count) : data_(allocate(count)), size_(count) {
    std::fill_n(data_.get(), size_, 0.0f);
}

ParamVector::ParamVector(const ParamVector& other)
    : data_(allocate(other.size_)), size_(other.size_) {
    std::copy_n(other.data_.get(), size_, data_.get());
}

ParamVector& ParamVector::operator=(const ParamVector& other) {
    if (this == &other) return *this;
    if (size_ != other.size_) {
        data_.reset(allocate(other.size_));
        size_ = other.size_;
    }
    std::copy_n(other.data_.get(), size_, data_.get());
    return *this;
}

ParamVector::ParamVector(ParamVector&& other) noexcept
    : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}

ParamVector& ParamVector::operator=(ParamVector&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    return *this;
}

std::span<float> ParamVector::slice(std::size_t offset, std::size_t count) {
    if (offset > size_ || count > size_ - offset)
        throw std::out_of_range(fmt::format("slice [{}, {}) is outside a vector of {} parameters",
                                            offset, offset + count, size_));
    return {data() + offset, count};
}

std::span<const float> ParamVector::slice(std::size_t offset, std::size_t count) const {
    return const_cast<ParamVector*>(this)->slice(offset, count);
}

void ParamVector::fill(float value) noexcept {
    std::fill_n(data_.get(), size_, value);
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) noexcept {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace gossamer
