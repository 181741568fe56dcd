#pragma once
// Helpers of the gossamer::Peer tests: a topology file in a temporary folder, and N user loops
// as threads of one process, each with its own gossamer::Peer over one in-process job.

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/peer.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "support/temp_dir.hpp"

namespace api_test {

using namespace gossamer;

/// Writes the topology file of a generated family and returns its path.
inline std::string topology_file(const test::TempDir& dir, const char* family, int n,
                                 topology::WeightRule w) {
    topology::FamilySpec f;
    f.family = family;
    f.n = n;
    f.weights = w;
    return dir.write(std::string(family) + ".json",
                     topology::family_topology_json(f, topology::LocalPeers{}).dump());
}

inline PeerOptions inproc_options(const std::string& topology, int rank, const char* algorithm,
                                  std::int64_t steps, std::shared_ptr<InprocJob> job) {
    PeerOptions o;
    o.topology = topology;
    o.rank = rank;
    o.algorithm = algorithm;
    o.steps = steps;
    o.transport = PeerTransport::inproc;
    o.inproc = std::move(job);
    o.join_timeout = std::chrono::milliseconds(10'000);
    o.step_timeout = std::chrono::milliseconds(20'000);
    o.stall_timeout = std::chrono::milliseconds(15'000);
    o.run_timeout = std::chrono::milliseconds(60'000);
    return o;
}

/// What one user loop ended with.
struct LoopOutcome {
    std::vector<float> params;  ///< after finish()
    PeerMetrics metrics;
    std::string error;     ///< what the Peer threw, if it threw
    int failed_rank = -1;  ///< PeerFailure::rank() when it threw one
    double seconds = 0;    ///< from the start until the last step() returned
};

/// Runs body(rank, outcome) for ranks 0..n-1 on n threads; body constructs its Peer and fills
/// the outcome; exceptions are caught into it.
inline std::vector<LoopOutcome> run_loops(int n,
                                          const std::function<void(int, LoopOutcome&)>& body) {
    std::vector<LoopOutcome> out(static_cast<std::size_t>(n));
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            auto& me = out[static_cast<std::size_t>(r)];
            try {
                body(r, me);
            } catch (const PeerFailure& e) {
                me.error = e.what();
                me.failed_rank = e.rank();
            } catch (const std::exception& e) {
                me.error = e.what();
            }
        });
    threads.clear();
    return out;
}

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace api_test
