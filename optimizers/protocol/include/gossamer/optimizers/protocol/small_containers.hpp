#pragma once
/// Containers for per-neighbour protocol state at simulator scale (docs/modules/simulator.md,
/// "Scale"): a simulated job holds n peers times their neighbours of these, so each must be small
/// and allocate nothing until used.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gossamer::proto {

/// A map from a small key to a value, kept as one sorted vector: iteration in ascending key
/// order (as std::map), lookups by binary search, one allocation for all entries. The keys are
/// mirrored in a vector of their own, so a lookup touches a cache line or two of keys instead of
/// one large value per probe (async's neighbours are about 400 bytes each).
template <class K, class V>
class FlatMap {
  public:
    using value_type = std::pair<K, V>;
    using iterator = typename std::vector<value_type>::iterator;
    using const_iterator = typename std::vector<value_type>::const_iterator;

    iterator begin() noexcept { return items_.begin(); }
    iterator end() noexcept { return items_.end(); }
    const_iterator begin() const noexcept { return items_.begin(); }
    const_iterator end() const noexcept { return items_.end(); }
    std::size_t size() const noexcept { return items_.size(); }
    /// Room for n entries in all (a map filled once to a known size then holds no slack).
    void reserve(std::size_t n) {
        keys_.reserve(n);
        items_.reserve(n);
    }

    iterator find(const K& k) {
        const std::size_t i = lower(k);
        return i < keys_.size() && keys_[i] == k ? items_.begin() + static_cast<std::ptrdiff_t>(i)
                                                 : items_.end();
    }
    const_iterator find(const K& k) const {
        const std::size_t i = lower(k);
        return i < keys_.size() && keys_[i] == k ? items_.begin() + static_cast<std::ptrdiff_t>(i)
                                                 : items_.end();
    }
    V& at(const K& k) {
        auto it = find(k);
        if (it == items_.end()) throw std::out_of_range("FlatMap::at");
        return it->second;
    }
    const V& at(const K& k) const {
        auto it = find(k);
        if (it == items_.end()) throw std::out_of_range("FlatMap::at");
        return it->second;
    }
    /// The value of k, inserted (default-constructed) where missing.
    V& operator[](const K& k) {
        const std::size_t i = lower(k);
        const auto at = static_cast<std::ptrdiff_t>(i);
        if (i == keys_.size() || keys_[i] != k) {
            keys_.insert(keys_.begin() + at, k);
            items_.insert(items_.begin() + at, value_type{k, V{}});
        }
        return items_[i].second;
    }

  private:
    std::size_t lower(const K& k) const {
        return static_cast<std::size_t>(std::lower_bound(keys_.begin(), keys_.end(), k) -
                                        keys_.begin());
    }
    std::vector<K> keys_;
    std::vector<value_type> items_;
};

}  // namespace gossamer::proto
