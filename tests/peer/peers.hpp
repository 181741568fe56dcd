#pragma once
// N real-time peers as threads over the in-process backend, each with its own Driver.

#include <barrier>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol.hpp"
#include "gossamer/peer/driver.hpp"
#include "gossamer/topology/schedule.hpp"
#include "gossamer/transport/inproc.hpp"

namespace peer_test {

using namespace gossamer;

/// What one peer's thread saw.
struct Outcome {
    std::optional<peer::DriverResult> result;
    std::string error;               ///< what run() threw, if it threw
    std::optional<int> failed_rank;  ///< PeerFailure::rank() when it threw one
    double seconds = 0;              ///< wall time of run()
};

inline std::shared_ptr<const topology::Schedule> family(const char* name, int n,
                                                        topology::WeightRule w) {
    topology::FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = w;
    return topology::generate(f);
}

/// Runs protocols[r] with workers[r] as rank r, each on its own thread with its own transport.
/// A peer that stops at fail_at drops its transport at once (the others see it leave); the
/// others keep theirs until every driver returned, as finished processes stay reachable until
/// the launcher ends the job.
inline std::vector<Outcome> run_peers(const std::vector<proto::Protocol*>& protocols,
                                      const std::vector<proto::LocalWorker*>& workers,
                                      const std::function<peer::DriverOptions(int)>& options) {
    const int n = static_cast<int>(protocols.size());
    auto fabric = transport::make_inproc_fabric(n);
    std::barrier sync(n);
    std::vector<Outcome> out(static_cast<std::size_t>(n));
    {
        std::vector<std::jthread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                transport::TransportOptions o;
                o.rank = r;
                o.size = n;
                o.job_id = 7;
                o.default_timeout = transport::Duration(5000);
                auto t = transport::make_inproc_transport(fabric, o);
                sync.arrive_and_wait();  // all joined before anyone sends
                Outcome& me = out[static_cast<std::size_t>(r)];
                const auto t0 = std::chrono::steady_clock::now();
                try {
                    peer::Driver d(*protocols[static_cast<std::size_t>(r)],
                                   *workers[static_cast<std::size_t>(r)], *t, options(r));
                    me.result = d.run();
                } catch (const PeerFailure& e) {
                    me.error = e.what();
                    me.failed_rank = e.rank();
                } catch (const std::exception& e) {
                    me.error = e.what();
                }
                me.seconds =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (me.result && me.result->failed) {
                    t.reset();  // the emulated crash: this peer leaves the fabric now
                    sync.arrive_and_drop();
                    return;
                }
                sync.arrive_and_wait();
            });
    }
    return out;
}

}  // namespace peer_test
