#pragma once
/// What one forked rank of `gossamer bench allreduce` does (allreduce.cpp forks them).

#include <chrono>
#include <cstddef>
#include <vector>

#include "ranks.hpp"

namespace gossamer::bench {

struct RankJob {
    int n = 2;
    std::vector<std::size_t> sizes;  ///< bytes, whole floats
    int iterations = 0, warmup = 0;
    int chunks = 1;  ///< 0: chunks_for() per size (allreduce.hpp)
    bool peer_errors = false;
    bool exchange = true;  ///< also time the one-peer-exponential exchange (n a power of 2)
    std::chrono::milliseconds timeout{120'000};
};

/// The rank's part: sends its UCX address ('A'), receives everybody's ('A'), connects, then for
/// each size runs warmup + iterations ring all-reduces and (when job.exchange) as many exchange
/// rounds, each after a barrier with the parent, checks every result, and finally sends all its
/// times in seconds ('T': per size, the all-reduce times, then the exchange times). Throws
/// gossamer::Error when a result is wrong, a peer fails or a wait times out.
void run_rank(const RankJob& job, RankChannel& channel);

}  // namespace gossamer::bench
