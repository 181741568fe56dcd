#pragma once
/// Splitting a data set among peers, and the per-epoch mini-batch order of one peer.
///
/// Everything here is deterministic for a seed: every peer computes the same assignment on its
/// own and keeps only its rows. Errors are ConfigErrors whose path is the training-config key
/// at fault ("sharding.alpha", "batch_size", ...).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/rng.hpp"

namespace gossamer {

/// A Gamma(shape, 1) variate by Marsaglia and Tsang (2000); shape < 1 uses the boost
/// Gamma(shape + 1) * U^(1/shape). shape > 0. Deterministic for the generator's state.
double gamma_variate(Rng& rng, double shape);

/// Fills `out` with a Dirichlet(alpha, ..., alpha) draw (normalised gammas); alpha > 0.
/// When every gamma underflows to 0 (alpha far below 1), returns the limiting one-hot vector
/// at a uniformly drawn index.
void dirichlet(Rng& rng, double alpha, std::span<double> out);

enum class ShardMode {
    iid,         ///< a uniform random split (sizes proportional to `sizes`, equal by default)
    dirichlet,   ///< label skew: each class is split among peers by a Dirichlet(alpha) draw
    contiguous,  ///< consecutive samples in the data's order (text: each peer a region of it)
};

struct ShardSpec {
    ShardMode mode = ShardMode::iid;
    int peers = 1;       ///< number of shards, >= 1
    double alpha = 1.0;  ///< Dirichlet concentration (> 0); small = skewed, large = iid
    std::vector<double> sizes =
        {};  ///< iid, contiguous: relative sizes (> 0), one per peer; empty = equal
    std::uint64_t seed = 0;
};

/// The sample indices (ascending) each peer holds: result[r] for peer r. The shards partition
/// [0, data.size()) exactly and are never empty.
/// iid: the samples are shuffled and cut into pieces of sizes proportional to spec.sizes;
/// contiguous: the same cut without the shuffle (peer r holds the r-th run of samples)
/// (cumulative rounding). dirichlet: for each class in turn, proportions over peers are
/// drawn from Dirichlet(alpha) and the class's shuffled samples cut by them, no peer taking more
/// than its equal share n/peers (within one; the excess is cut again over the peers with room),
/// so every shard has its equal share exactly, as iid's.
/// Throws ConfigError for peers < 1, more peers than samples, alpha <= 0 or non-finite, sizes of
/// the wrong count or not > 0, sizes with dirichlet, dirichlet on a set without labels, or an
/// empty shard (iid only).
std::vector<std::vector<std::int64_t>> shard_indices(const Dataset& data, const ShardSpec& spec);

/// A copy of the rows `rows` of `data` (features, labels, targets and shape), named `name`.
Dataset subset(const Dataset& data, std::span<const std::int64_t> rows, std::string name);

/// Peer `rank`'s shard as its own Dataset (a copy of its rows), named "<data.name>/shard<r>".
/// Throws as shard_indices, and ConfigError when rank is not in [0, peers).
Dataset shard_for_peer(const Dataset& data, const ShardSpec& spec, int rank);
/// The same from an assignment shard_indices already computed (no second shuffle); ConfigError
/// when rank is not in [0, shards.size()).
Dataset shard_for_peer(const Dataset& data, std::span<const std::vector<std::int64_t>> shards,
                       int rank);

/// Throws ConfigError (path "batch_size") unless 1 <= batch_size <= every shard size, e.g.
/// "batch size 128 is larger than peer 3's shard of 100 samples; lower batch_size or use fewer
/// peers".
void check_batch_size(int batch_size, std::span<const std::int64_t> shard_sizes);

/// A uniformly random permutation of [0, n) by Fisher-Yates, from (seed, epoch) alone: the same
/// pair gives the same order, another epoch another order.
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed,
                                            std::uint64_t epoch);

/// Owned storage that a Batch points into.
struct BatchBuffer {
    std::vector<float> x;
    std::vector<std::int32_t> labels;
    std::vector<float> targets;
};

/// Copies the rows `rows` of `data` into `buffer` (contiguously, in that order) and returns a
/// Batch over them; the Batch stays valid until `buffer` is next changed. Rows must be in range.
Batch gather_batch(const Dataset& data, std::span<const std::int64_t> rows, BatchBuffer& buffer);

/// The mini-batches of one peer's shard, epoch after epoch: epoch e visits the shard in the
/// order epoch_permutation(size, seed, e), batch_size samples at a time. With drop_last the
/// incomplete tail of an epoch is skipped, so every batch has exactly batch_size samples.
/// Not thread-safe; the Dataset must outlive the loader.
class BatchLoader {
  public:
    /// Throws ConfigError as check_batch_size, naming peer `rank` in the message.
    BatchLoader(const Dataset& shard, int batch_size, std::uint64_t seed, int rank = 0,
                bool drop_last = true);

    /// Batches in one epoch (at least 1).
    std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
    int batch_size() const { return batch_size_; }

    /// The batch of global step `step` (epoch = step / batches_per_epoch()); the view is valid
    /// until the next call. Reshuffles only when the epoch changes.
    Batch at_step(std::int64_t step);

    /// The next batch of the current epoch, or nullopt at its end (then start_epoch()).
    std::optional<Batch> next();
    /// Starts epoch `epoch` from its first batch.
    void start_epoch(std::uint64_t epoch);
    std::uint64_t epoch() const { return epoch_; }

  private:
    Batch batch(std::int64_t index);

    const Dataset* data_;
    int batch_size_;
    std::uint64_t seed_;
    bool drop_last_;
    std::int64_t batches_per_epoch_;
    std::uint64_t epoch_ = 0;
    std::int64_t cursor_ = 0;
    std::vector<std::int64_t> order_;
    BatchBuffer buffer_;
};

}  // namespace gossamer
