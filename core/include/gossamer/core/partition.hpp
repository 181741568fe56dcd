#pragma once
/// Partitions: named contiguous ranges of the parameter vector that together cover it exactly once.
///
/// A model's layers are its default partitions (one per layer). Multirate training and per-part
/// gossip use coarser ones, built by grouping layers ({"fast": ["fc3"], "slow": ["*"]}). Peers
/// compare layouts in their handshake, so a layout has value equality and a stable fingerprint.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer {

namespace json {
class Node;
}

/// A named range [offset, offset + size) of the parameter vector, in elements (floats).
struct Partition {
    std::string name;
    std::size_t offset = 0;
    std::size_t size = 0;

    std::size_t end() const noexcept { return offset + size; }
    friend bool operator==(const Partition&, const Partition&) = default;
};

/// A set of partitions that is not a valid layout (overlap, gap, out of range, empty or
/// duplicate name, empty range), or a grouping that names unknown layers. The message says which
/// partitions and how to fix it.
class PartitionError : public Error {
  public:
    using Error::Error;
};

/// Why `parts` (in any order) do not cover [0, total) exactly once with non-empty, uniquely named
/// ranges; nullopt when they do. Example: "partitions 'fast' [100, 200) and 'slow' [150, 300)
/// overlap; give each parameter to exactly one partition".
std::optional<std::string> partition_problem(std::span<const Partition> parts, std::size_t total);

/// A validated partition layout: partitions sorted by offset, covering [0, total()) exactly once.
/// The index of a partition in this order is its id (the wire header's "partition id").
class PartitionLayout {
  public:
    /// No partitions over an empty vector.
    PartitionLayout() = default;
    /// Sorts `parts` by offset and validates them; throws PartitionError with the message of
    /// partition_problem().
    PartitionLayout(std::vector<Partition> parts, std::size_t total);

    /// One partition per layer (the default layout); `layers` as Model::layers() returns them.
    static PartitionLayout per_layer(std::span<const Partition> layers);
    /// A single partition named `name` over the whole vector.
    static PartitionLayout whole(std::size_t total, std::string name = "all");

    std::size_t total() const noexcept { return total_; }
    std::size_t count() const noexcept { return parts_.size(); }
    std::span<const Partition> partitions() const noexcept { return parts_; }
    const Partition& operator[](std::size_t id) const { return parts_.at(id); }
    /// The id of the partition called `name`, or nullopt.
    std::optional<std::size_t> find(std::string_view name) const;
    /// The id of the partition holding parameter `index` (< total()).
    std::size_t owner(std::size_t index) const;

    /// A 64-bit FNV-1a hash of total, names, offsets and sizes. Stable across runs, platforms and
    /// compilers, so two peers can compare layouts by exchanging 8 bytes.
    std::uint64_t fingerprint() const noexcept;
    /// One line for logs and handshake errors: "fc1 [0, 100), fc2 [100, 130)".
    std::string describe() const;

    friend bool operator==(const PartitionLayout&, const PartitionLayout&) = default;

  private:
    std::vector<Partition> parts_;
    std::size_t total_ = 0;
};

/// One named group of layers. "*" stands for every layer that no other group names.
struct LayerGroup {
    std::string name;
    std::vector<std::string> layers;
};

/// Builds partitions from groups of layer names. Each group must name at least one layer, every
/// layer must belong to exactly one group, and a group's layers must be adjacent (a partition is
/// one contiguous range). Throws PartitionError naming the layer and listing the model's layers.
PartitionLayout group_layers(std::span<const Partition> layers, std::span<const LayerGroup> groups);

/// Reads a partition config: a JSON object whose keys are partition names and whose values are
/// either arrays of layer names ("*" = the remaining layers) or explicit ranges
/// {"offset": o, "size": n} in parameters. Throws ConfigError naming the JSON path.
PartitionLayout partitions_from_config(const json::Node& node, std::span<const Partition> layers);

}  // namespace gossamer
