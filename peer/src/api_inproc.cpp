// gossamer::Peer over the in-process transport: N peers as threads of one process. The job
// stands in for the bootstrap: a start-up barrier with the handshake's checks (model size,
// partitions and the same settings the bootstrap compares), and an end barrier so that a
// finished peer keeps its transport until the others finished.
#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "api_connect.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/transport/inproc.hpp"

namespace gossamer {

class InprocJob {
  public:
    explicit InprocJob(int n)
        : n_(n), fabric_(transport::make_inproc_fabric(n)), seats_(static_cast<std::size_t>(n)) {}

    struct Seat {
        bool joined = false;
        std::uint64_t model_size = 0;
        PartitionLayout layout;
        std::vector<bootstrap::Setting> settings;
        bool gone = false;  // finished or left
    };

    int n_;
    std::shared_ptr<transport::InprocFabric> fabric_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Seat> seats_;
};

std::shared_ptr<InprocJob> make_inproc_job(int n) {
    if (n < 1)
        throw ConfigError("", "make_inproc_job", fmt::format("a job of {} peers", n),
                          "give the topology file's peer count (1 or more)");
    return std::make_shared<InprocJob>(n);
}

namespace api {
namespace {

std::string ranks_where(const std::vector<InprocJob::Seat>& seats, bool joined) {
    std::string s;
    for (std::size_t r = 0; r < seats.size(); ++r)
        if (seats[r].joined == joined) s += fmt::format("{}{}", s.empty() ? "" : ", ", r);
    return s;
}

class InprocConnection final : public Connection {
  public:
    InprocConnection(InprocJob& job, int rank) : job_(job), rank_(rank) {}
    ~InprocConnection() override {
        if (!transport_) return;
        std::lock_guard lock(job_.mutex_);
        job_.seats_[static_cast<std::size_t>(rank_)].gone = true;
        job_.cv_.notify_all();
    }

    transport::Transport& transport() override { return *transport_; }
    // Threads of one process read one clock.
    bootstrap::ClockOffset clock_offset() const override { return {}; }

    void join(const JoinRequest& req) {
        transport::TransportOptions o;
        o.rank = req.rank;
        o.size = job_.n_;
        o.job_id = req.options->job_id;
        transport_ = transport::make_inproc_transport(job_.fabric_, o);
        std::unique_lock lock(job_.mutex_);
        auto& seat = job_.seats_[static_cast<std::size_t>(rank_)];
        seat.joined = true;
        seat.model_size = req.model_size;
        seat.layout = req.layout;
        seat.settings = req.settings;
        job_.cv_.notify_all();
        const auto all = [&] {
            for (const auto& s : job_.seats_)
                if (!s.joined) return false;
            return true;
        };
        if (!job_.cv_.wait_for(lock, req.options->join_timeout, all))
            throw Timeout(
                fmt::format("rank {}: peers {} did not join the in-process job within {:.1f} s "
                            "(PeerOptions::join_timeout)",
                            rank_, ranks_where(job_.seats_, false),
                            std::chrono::duration<double>(req.options->join_timeout).count()));
        // The handshake's model checks (docs/modules/bootstrap.md), against rank 0 as the
        // rendezvous.
        const auto& first = job_.seats_[0];
        for (std::size_t r = 1; r < job_.seats_.size(); ++r) {
            const auto& s = job_.seats_[r];
            if (s.model_size != first.model_size)
                throw ConfigError(
                    "", "params",
                    fmt::format("rank {} hands over {} parameters, rank 0 hands over {}", r,
                                s.model_size, first.model_size),
                    "every peer must hand over the same parameter vector");
            if (!(s.layout == first.layout))
                throw ConfigError("", "layout",
                                  fmt::format("rank {} has partitions {}, rank 0 has {}", r,
                                              s.layout.describe(), first.layout.describe()),
                                  "every peer must name the same partitions");
            // Every peer throws the same line, the first field that differs from rank 0's.
            if (auto m = bootstrap::compare_settings(s.settings, first.settings))
                throw ConfigError("", "PeerOptions",
                                  bootstrap::mismatch_text(*m, static_cast<int>(r), 0));
        }
    }

    void close(bool finished, Clock::time_point deadline) override {
        std::unique_lock lock(job_.mutex_);
        job_.seats_[static_cast<std::size_t>(rank_)].gone = true;
        job_.cv_.notify_all();
        const auto all_gone = [&] {
            for (const auto& s : job_.seats_)
                if (!s.gone) return false;
            return true;
        };
        const bool ok = !finished || job_.cv_.wait_until(lock, deadline, all_gone);
        lock.unlock();
        transport_.reset();  // the others see this peer leave
        if (!ok)
            throw Timeout(fmt::format(
                "rank {}: the other peers did not finish within PeerOptions::run_timeout", rank_));
    }

  private:
    InprocJob& job_;
    int rank_;
    std::unique_ptr<transport::Transport> transport_;
};

}  // namespace

std::unique_ptr<Connection> join_inproc(InprocJob& job, const JoinRequest& req) {
    const int n = req.topology->n();
    if (job.n_ != n)
        throw ConfigError(
            req.topology->source, "peers",
            fmt::format("the topology file has {} peers, the in-process job {}", n, job.n_),
            fmt::format("create the job with make_inproc_job({})", n));
    auto c = std::make_unique<InprocConnection>(job, req.rank);
    c->join(req);
    return c;
}

}  // namespace api
}  // namespace gossamer
