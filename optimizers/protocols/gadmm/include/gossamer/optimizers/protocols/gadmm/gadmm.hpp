#pragma once
/// GADMM: group ADMM on a chain (Elgabli et al., JMLR 2020). See docs/algorithms/gadmm.md.
///
/// The peers form a chain in rank order, 0 - 1 - ... - n-1; the topology must link every rank i
/// with i + 1 in both directions (a ring, whose edge n-1 - 0 goes unused, or a path), else the
/// constructor refuses it. Even positions are heads, odd ones tails. Peer p holds its primal
/// theta_p and the dual lambda_e of each of its chain edges e = (p-1, p) and (p, p+1); both ends
/// of an edge hold the same dual, bit for bit. Iteration k:
///   heads:  theta_p <- approx argmin f_p(theta) + sum_e penalty_e(theta, lambda_e^k, theta_q^k)
///           then send theta_p^{k+1} to both neighbours;
///   tails:  the same once both heads' theta^{k+1} are here, then send theta_p^{k+1};
///   both:   lambda_e <- lambda_e + rho (theta_left^{k+1} - theta_right^{k+1}).
/// The augmented Lagrangian is sum_p f_p + sum_e <lambda_e, theta_l - theta_r>
/// + rho/2 |theta_l - theta_r|^2. The primal argmin is solved inexactly by `local_steps` of the
/// worker's optimizer on the gradient of f_p (a minibatch) plus the penalty's gradient
/// -lambda_{p-1} + lambda_p + rho (theta - theta_{p-1}) + rho (theta - theta_{p+1}).
///
/// Messages: MessageKind::full_model, round = the iteration k, chunk = 1 on the sender's last
/// iteration (the receiver then holds that neighbour fixed and stops updating the edge's dual).
/// Each peer sends at most 2 models per iteration. A failed neighbour is held fixed the same way
/// (the chain splits into two chains that no longer agree).
///
/// Host memory only: a worker whose parameters live on a device is refused (ConfigError).

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

struct GadmmOptions {
    double rho = 0.5;     ///< penalty and dual step, > 0
    int local_steps = 5;  ///< optimizer steps per primal update (the inexact argmin), >= 1
};

/// Reads {"rho": r, "local_steps": J} (nullptr: defaults). Throws ConfigError naming the path.
GadmmOptions parse_gadmm_options(const json::Node* options);

class Gadmm final : public Protocol {
  public:
    /// Throws TopologyError when the topology does not link every i and i + 1 both ways, and
    /// ConfigError for bad options or a worker on a device.
    Gadmm(PeerContext ctx, GadmmOptions options);

    std::string_view name() const override { return "gadmm"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { copy_params_to(out); }

    bool head() const noexcept { return rank() % 2 == 0; }
    /// Iterations completed (primal and dual updates done).
    std::int64_t iteration() const noexcept { return k_; }
    /// The dual of edge (rank-1, rank) (side 0) or (rank, rank+1) (side 1); empty when absent.
    std::span<const float> dual(int side) const { return side_[side].lambda; }

  protected:
    void on_start(Time now, Actions& out) override;
    void on_step_finished(Time now, double loss, Actions& out) override;
    void on_message(Time now, Message msg, Actions& out) override;
    void on_peer_failed(Time now, int rank, Actions& out) override;

  private:
    enum class Stage { wait_primal, stepping, wait_dual, done };
    struct Side {
        int peer = -1;                          // -1: chain end
        bool failed = false;                    // gone: no penalty, no dual, nothing awaited
        std::int64_t last = -1;                 // `have` of its last theta (it finished), else -1
        std::vector<float> theta;               // its latest theta
        std::vector<float> lambda;              // the edge's dual
        std::int64_t have = -1;                 // latest iteration whose theta is in `theta`
        std::map<std::int64_t, Message> early;  // later iterations, waiting
        std::uint64_t seq = 0;                  // messages sent to it
    };

    void advance(Actions& out);
    bool ready(std::int64_t iteration) const;  // both neighbours' theta of `iteration` taken
    void take(std::int64_t iteration);
    void send_theta(Actions& out);
    void update_duals();

    GadmmOptions options_;
    bool math_;
    Stage stage_ = Stage::wait_primal;
    Side side_[2];
    std::int64_t k_ = 0;      // current iteration
    int inner_ = 0;           // optimizer steps taken in this primal update
    std::int64_t steps_ = 0;  // optimizer steps taken in all
    bool sent_ = false;       // theta^{k+1} sent in this iteration
    std::vector<float> g_;    // gradient plus penalty
};

std::unique_ptr<Protocol> make_gadmm(const json::Node* options, PeerContext ctx);

}  // namespace gossamer::proto
