#pragma once
/// LSGD: leader stochastic gradient descent, decentralized (Teng et al., NeurIPS 2019). See
/// docs/algorithms/lsgd.md.
///
/// Every step has two forces: the gradient step and a pull towards the leader. Round t of peer i
/// is its step t:
///   x_half = x - lr g(x)                        (the worker's optimizer step)
///   every `period` rounds: send x_half to the out-neighbours of topology round t, with the
///   peer's smoothed loss; once every live in-neighbour's x_half of round t is here, the leader
///   is the lowest smoothed loss among the peer itself and those in-neighbours (ties: the lower
///   rank), and x <- x_half - lambda (x_half - x_leader)   (nothing when the peer leads).
/// The smoothed loss is an exponential average of the step losses, l <- b l + (1 - b) loss
/// (b = `smoothing`; the first step's loss starts it).
///
/// Messages: MessageKind::full_model, round = t, weight = the sender's smoothed loss (the
/// header's one double; lsgd sends no push-sum shares), edge_seq per out-edge. A peer sends
/// whole models on communication rounds only, one per out-neighbour. Messages of later rounds
/// wait in a buffer. A failed in-neighbour is no longer waited for or led by.
///
/// Host memory only: a worker whose parameters live on a device is refused (ConfigError).

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

struct LsgdOptions {
    double pull = 0.2;       ///< lambda, in (0, 1]
    int period = 1;          ///< rounds between two pulls (and their messages), >= 1
    double smoothing = 0.9;  ///< b of the smoothed loss, in [0, 1)
};

/// Reads {"pull": l, "period": p, "smoothing": b} (nullptr: defaults). Throws ConfigError
/// naming the JSON path.
LsgdOptions parse_lsgd_options(const json::Node* options);

class Lsgd final : public Protocol {
  public:
    Lsgd(PeerContext ctx, LsgdOptions options);

    std::string_view name() const override { return "lsgd"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }

    /// The leader of the last pull (this peer's own rank when it led), -1 before the first.
    int leader() const noexcept { return leader_; }
    /// Pulls in which another peer led.
    std::int64_t pulls() const noexcept { return pulls_; }
    double smoothed_loss() const noexcept { return loss_; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;

  private:
    bool communicates(std::int64_t t) const { return (t + 1) % options_.period == 0; }
    void try_pull(Actions& out);
    void next(Actions& out);

    LsgdOptions options_;
    bool math_;
    bool waiting_ = false;  // round t_'s messages are awaited
    std::int64_t t_ = 0;    // the current round (steps finished, before the pull is done)
    double loss_ = 0;
    bool have_loss_ = false;
    int leader_ = -1;
    std::int64_t pulls_ = 0;
    std::map<int, std::uint64_t> seq_;                    // per out-edge
    std::map<std::pair<std::int64_t, int>, Message> in_;  // (round, sender)
    std::set<int> dead_;
};

std::unique_ptr<Protocol> make_lsgd(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
