#pragma once
/// The ring all-reduce schedule as pure functions of (rank, step), with no I/O (STYLE.md, UCC's
/// coll_patterns/ring.h).
///
/// A vector of `length` floats is cut into n segments of near-equal size (the first length % n
/// segments hold one extra element; when length < n the last ones are empty), and each segment
/// into `chunks` chunks the same way. Peer r sends only to r + 1 and receives only from r - 1
/// (mod n). There are 2(n - 1) steps:
///   reduce-scatter, k in [0, n - 1):   send segment r - k, receive segment r - k - 1 and add
///                                      the peer's own values into it;
///   all-gather, k in [n - 1, 2n - 2):  with j = k - (n - 1), send segment r + 1 - j, receive
///                                      segment r - j and copy it.
/// After the reduce-scatter peer r holds the full sum of segment r + 1 (its owned segment). The
/// sum of segment s is formed along the ring s, s + 1, ..., s - 1 in that order on every run, so
/// the result does not depend on message timing.

#include <cstddef>
#include <cstdint>

namespace gossamer::proto::ring {

/// A half-open range [begin, end) of vector elements.
struct Range {
    std::size_t begin = 0, end = 0;
    std::size_t size() const noexcept { return end - begin; }
    bool operator==(const Range&) const = default;
};

/// Part `index` of `parts` near-equal parts of `whole` (the first whole.size() % parts parts
/// hold one extra element). parts >= 1, 0 <= index < parts.
Range split(Range whole, int parts, int index) noexcept;

/// Segment s (0 <= s < n) of a vector of `length` elements.
Range segment(std::size_t length, int n, int s) noexcept;

/// Chunk c (0 <= c < chunks) of segment s.
Range chunk(std::size_t length, int n, int s, int chunks, int c) noexcept;

/// Steps in one all-reduce: 2(n - 1) (0 for n = 1).
int steps(int n) noexcept;

/// What peer `rank` does at step k of the schedule (0 <= k < steps(n)).
struct Step {
    int send_to = 0;       ///< rank + 1 (mod n)
    int recv_from = 0;     ///< rank - 1 (mod n)
    int send_segment = 0;  ///< the segment this peer sends at step k
    int recv_segment = 0;  ///< the segment it receives at step k
    bool reduce = false;   ///< true: add the received values (reduce-scatter); false: copy them
};
Step step(int rank, int n, int k) noexcept;

/// The segment whose full sum peer `rank` holds after the reduce-scatter: rank + 1 (mod n).
int owned_segment(int rank, int n) noexcept;

}  // namespace gossamer::proto::ring
