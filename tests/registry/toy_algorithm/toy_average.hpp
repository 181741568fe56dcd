#pragma once
// toy_average: the smallest gossip protocol, added the way docs/algorithms/README.md ("Adding an
// algorithm") says: this folder plus one register_algorithm line, with no edit to a driver. Each
// step: a local SGD step, then x goes to the round's out-neighbours and is averaged uniformly with
// what came from the round's in-neighbours. No replicas, compression, elastic jobs or
// checkpoints; a failed neighbour is no longer waited for.

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "gossamer/optimizers/protocol/registry.hpp"

namespace toy {

using namespace gossamer;
using namespace gossamer::proto;

class ToyAverage final : public Protocol {
  public:
    explicit ToyAverage(PeerContext ctx);

    std::string_view name() const override { return "toy_average"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;

  private:
    void next(Actions& out);
    void try_mix(Actions& out);

    bool math_;
    bool waiting_ = false;  // round t_'s messages are awaited (no step runs)
    std::int64_t t_ = 0;    // the current round: steps finished before its mix
    std::map<std::pair<std::int64_t, int>, Message> in_;  // (round, sender)
    std::map<int, std::uint64_t> seq_;                    // per out-edge
    std::set<int> dead_;
};

/// The registry entry: every driver question takes its default answer.
Algorithm toy_average_algorithm();

}  // namespace toy
