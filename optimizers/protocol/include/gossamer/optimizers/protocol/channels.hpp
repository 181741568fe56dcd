#pragma once
/// Per-partition gossip channels and partition-ready: how protocols cut the model into
/// the ranges they send (docs/algorithms/protocol-contract.md).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/local/worker.hpp"

namespace gossamer::proto {

/// One partition's gossip channel as the averaging protocols (dpsgd, choco) set it up: the
/// partition's id, range and gossip period, and its own compressor if it has one.
struct PartitionChannel {
    std::uint32_t id = 0;     ///< partition id on the wire
    std::uint32_t chunk = 0;  ///< the range's index within its partition (chunked sends)
    std::size_t offset = 0, size = 0;
    int period = 1;  ///< gossip period in steps
    int phase = 0;   ///< due that many steps before the period's end (gossip_offset)
    std::unique_ptr<optim::Compressor> compressor;  ///< the partition's own, or null
};

/// One channel per partition of the worker's multirate rates, or one over the whole model
/// (id 0, period 1, no compressor) without them. With chunk_values > 0, each partition is cut
/// into consecutive ranges of at most chunk_values values, one channel each (chunk 0, 1, ...;
/// each with its own compressor), in partition order (docs/algorithms/protocol-contract.md,
/// "Chunked sends").
std::vector<PartitionChannel> partition_channels(const LocalWorker& worker,
                                                 std::uint64_t chunk_values = 0);

/// When, as a fraction of a step, a backward pass has finished each partition of `parts` (a
/// model of `size` values), for drivers that declare partitions ready (partition_ready): a
/// forward pass of a third of the step, then a backward pass that finishes partitions in
/// reverse order, each taking its share of the values. Partition 0's is 1: the step's end.
std::vector<double> backward_ready_fractions(const PartitionLayout& parts, std::size_t size);

/// Where each (partition, chunk) of partition_channels' output sits in it: the channel a
/// message's `partition` and `chunk` name, found without a search.
class ChannelIndex {
  public:
    /// Appends channel c, at position slot (in partition_channels' order).
    void add(const PartitionChannel& c, std::size_t slot);
    /// The slot of (partition, chunk), or nullopt when this peer has no such channel.
    std::optional<std::size_t> find(std::uint32_t partition, std::uint32_t chunk) const;
    std::size_t partitions() const noexcept { return first_.size(); }

  private:
    std::vector<std::size_t> first_, count_;  // per partition id: chunk 0's slot, chunks
};

/// Whether worker `w` can take partition-ready events: math on the host, with partitions and no
/// multirate (what dpsgd's and choco's `"partition_ready": true` needs).
bool takes_partition_ready(const LocalWorker& w);
/// Refuses `"partition_ready": true` (wanted) on a worker that cannot take it, with the option
/// named and the fix: ConfigError for multirate or a device worker.
void check_partition_ready_option(bool wanted, const LocalWorker& w);

}  // namespace gossamer::proto
