#pragma once
/// Chunked sends (docs/algorithms/protocol-contract.md, "Chunked sends and the partition-ready
/// event"): the option "chunk_bytes" (a size, or "auto" sized from the link) and, for the push-sum
/// protocols (sgp, async), cutting a share into chunks and assembling the chunks that arrive.
///
/// A share is cut into contiguous ranges of at most chunk_values values; every chunk carries
/// the share's round, edge_seq and sent_at, its range in offset/elements and its index in chunk.
/// Only the last chunk carries the weight w: the receiver assembles the ranges of one share
/// (sender, edge_seq) and moves mass only when every value has come, so a share cut off midway
/// moves nothing and the mass stays exact.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/share_outbox.hpp"

namespace gossamer::proto {

/// The "chunk_bytes" option: 0 (no chunks), a size in bytes (>= 4), or "auto".
struct ChunkBytes {
    std::uint64_t bytes = 0;
    bool automatic = false;
};

/// "auto" on a link nobody describes (no cluster file: shared memory, loopback): 1 MiB, about
/// what `gossamer bench allreduce` found best there.
inline constexpr std::uint64_t kAutoChunkUnknownLink = 1ull << 20;
/// "auto" never goes below 64 KiB (a header is then under 0.2% of a chunk) or above 64 MiB.
inline constexpr std::uint64_t kAutoChunkMin = 64ull << 10;
inline constexpr std::uint64_t kAutoChunkMax = 64ull << 20;

/// Reads "chunk_bytes" at `node`: an integer >= 4 or the string "auto". Throws ConfigError
/// naming the file and path otherwise.
ChunkBytes parse_chunk_bytes(const json::Node& node);

/// At most this many chunks per share (a smaller chunk_bytes is refused).
inline constexpr std::uint64_t kMaxShareChunks = 1ull << 16;

/// Throws ConfigError (path chunk_bytes) when a fixed size cuts a model of `size` values into
/// more than kMaxShareChunks chunks.
void check_share_chunks(const ChunkBytes& option, std::size_t size);

/// The "auto" rule for one link: the smallest chunk whose latency is at most 10% of its time
/// (latency <= 0.1 (latency + bytes / bandwidth), i.e. bytes >= 9 latency bandwidth), with the
/// bandwidth the least of the link's, the sender's uplink and the receiver's downlink; rounded
/// up to whole floats and kept in [kAutoChunkMin, kAutoChunkMax]. Without a cluster:
/// kAutoChunkUnknownLink.
std::uint64_t auto_chunk_bytes(const Cluster* cluster, int from, int to);

/// The chunk size in bytes for the edge from -> to (0: no chunks).
std::uint64_t chunk_bytes_for(const ChunkBytes& option, const Cluster* cluster, int from, int to);

/// One size for every peer of the job, for protocols whose receivers must cut the model as
/// their senders do (dpsgd, choco: one channel per chunk): the largest "auto" size over the
/// edges of the topology's base graph, so that every link meets the latency rule. The same
/// cluster file gives every peer the same size.
std::uint64_t job_chunk_bytes(const ChunkBytes& option, const Cluster* cluster,
                              const topology::Schedule& topology);

/// Cuts share m into chunks of at most chunk_values values (0, or a share no longer than that:
/// m itself) and hands each to `send` in order of its range. Only the last carries m.weight.
void cut_share(Message m, std::uint64_t chunk_values, const std::function<void(Message)>& send);

/// How sgp and async post a share: held in `outbox` (non-null: the option is on) while the
/// edge is busy, otherwise cut into chunks of chunk_values values and sent through `send`, which
/// must append to out.sends; with an outbox, the chunks' send ids are recorded as one share in
/// flight.
void post_share(Actions& out, Message m, std::uint64_t chunk_values, ShareOutbox* outbox,
                const std::function<void(Message)>& send);

/// The receiving side: chunks of one share, keyed by (sender, edge_seq), put together.
class ShareAssembler {
  public:
    /// For a model of `size` values; math false: cost-only (no payloads, only counts).
    ShareAssembler(std::size_t size, bool math) : size_(size), math_(math) {}

    /// True when m is a whole share (offset 0, all size values), not a chunk.
    bool whole(const Message& m) const { return m.offset == 0 && m.elements == size_; }
    /// Adds chunk m; returns the whole share once its last value has come (weight: the sum of
    /// the chunks' weights, round and sent_at the chunks' own). Throws Error for a range past
    /// the model, a payload that does not match its range, or values that came twice.
    std::optional<Message> add(Message m);
    /// Shares of which some chunks, not all, have come.
    std::size_t partial() const noexcept { return open_.size(); }

  private:
    struct Open {
        Message share;
        std::size_t received = 0;
        std::map<std::size_t, std::size_t> ranges;  // offset -> end of the chunks received
    };
    std::size_t size_;
    bool math_;
    std::map<std::pair<int, std::uint64_t>, Open> open_;
};

}  // namespace gossamer::proto
