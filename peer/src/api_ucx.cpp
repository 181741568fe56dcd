// gossamer::Peer over UCX: the job is joined as `gossamer peer` joins it (peer/join.hpp): the TCP
// bootstrap at the topology file's host:port checks job, token, model size, partitions and the
// settings (topology, algorithm and options, multirate, final average), then the UCX transport
// connects every pair.
#include <fmt/format.h>

#include <algorithm>

#include "api_connect.hpp"
#include "gossamer/core/error.hpp"

#ifdef GOSSAMER_HAVE_UCX
#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/peer/guard.hpp"
#include "gossamer/peer/join.hpp"
#endif

namespace gossamer::api {

#ifdef GOSSAMER_HAVE_UCX
namespace {

class UcxConnection final : public Connection {
  public:
    UcxConnection(std::unique_ptr<peer::JoinedPeer> joined, const bootstrap::Options& joined_with)
        : joined_(std::move(joined)), guard_(*joined_, joined_with) {}
    ~UcxConnection() override {
        if (joined_) joined_->abandon();  // never closed: an error, leave as a crash would
    }

    transport::Transport& transport() override { return joined_->transport(); }
    bootstrap::ClockOffset clock_offset() const override {
        return joined_->bootstrap().clock_offset();
    }

    // The membership rules of `gossamer peer` (docs/modules/peer.md, "Membership"): throws
    // peer::NotMember when the job carried on without this peer.
    void poll() override { guard_.check(); }

    // Also without the peers the bootstrap lost (a goodbye included: it left before averaging).
    // Throws peer::NotMember unless they are a majority of the job's last agreed view.
    std::vector<int> survivors() override {
        auto out = guard_.survivors();
        if (auto line = guard_.minority(out)) throw peer::NotMember(*line);
        return out;
    }

    void close(bool finished, Clock::time_point) override {
        // Finished: a goodbye, the others see this peer leave, not fail. Otherwise the others
        // fail this peer at once instead of waiting for it until a timeout.
        if (!finished) joined_->abandon();
        joined_.reset();
    }

  private:
    std::unique_ptr<peer::JoinedPeer> joined_;
    peer::MembershipGuard guard_;
};

}  // namespace

std::unique_ptr<Connection> join_ucx(const JoinRequest& req) {
    const PeerOptions& o = *req.options;
    peer::JoinOptions j;
    j.bootstrap.rank = req.rank;
    for (const auto& p : req.topology->peers) j.bootstrap.peers.push_back({p.host, p.port});
    j.bootstrap.job_id = o.job_id;
    j.bootstrap.token = bootstrap::job_token(o.token_file);
    j.bootstrap.model_size = req.model_size;
    j.bootstrap.layout = req.layout;
    j.bootstrap.settings = req.settings;
    j.bootstrap.join_timeout = o.join_timeout;
    j.ucx.default_timeout = peer::send_timeout(req.model_size);
    const bootstrap::Options joined_with = j.bootstrap;
    return std::make_unique<UcxConnection>(peer::join(std::move(j)), joined_with);
}

#else

std::unique_ptr<Connection> join_ucx(const JoinRequest&) {
    throw ConfigError("", "PeerOptions::transport", "this build of Gossamer has no UCX transport",
                      "rebuild with -DGOSSAMER_USE_UCX=ON, or use PeerTransport::inproc");
}

#endif

}  // namespace gossamer::api
