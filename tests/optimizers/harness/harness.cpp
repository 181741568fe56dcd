// The protocol harness (harness.hpp): building the peers, running them, failures.
#include "optimizers/harness/harness.hpp"

#include <algorithm>
#include <stdexcept>

#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::testing {

namespace {

std::string str(std::int64_t v) {
    return std::to_string(v);
}

}  // namespace

Harness::Harness(const Peers& peers, HarnessOptions options)
    : options_(std::move(options)), rng_(options_.seed) {
    for (int r = 0; r < peers.n; ++r) {
        auto w = peers.worker(r);
        for (const auto& layer : peers.worker_layers) w = layer(std::move(w), r);
        proto::PeerContext ctx;
        ctx.rank = r;
        ctx.n = peers.n;
        ctx.topology = options_.topology;
        ctx.worker = w.get();
        ctx.max_steps = options_.max_steps;
        ctx.value_bound = options_.value_bound;
        auto p = peers.protocol(ctx);
        for (const auto& layer : peers.protocol_layers) p = layer(std::move(p), ctx);
        workers_.push_back(w.get());
        protocols_.push_back(p.get());
        owned_workers_.push_back(std::move(w));
        owned_protocols_.push_back(std::move(p));
    }
    init();
}

Harness::Harness(std::vector<std::unique_ptr<proto::LocalWorker>> workers,
                 const ProtocolFactory& make, HarnessOptions options)
    : Harness(Peers{static_cast<int>(workers.size()),
                    [&workers](int r) { return std::move(workers[static_cast<std::size_t>(r)]); },
                    make},
              std::move(options)) {}

Harness::Harness(std::vector<proto::Protocol*> protocols, std::vector<proto::LocalWorker*> workers,
                 HarnessOptions options)
    : options_(std::move(options)),
      workers_(std::move(workers)),
      protocols_(std::move(protocols)),
      rng_(options_.seed) {
    init();
}

Harness::~Harness() = default;

void Harness::init() {
    const auto n = protocols_.size();
    if (workers_.size() != n) fail_check("one worker per protocol");
    for (auto* p : protocols_) {
        if (options_.zero_copy) p->enable_zero_copy();
        if (options_.checkpoint_every > 0) p->enable_checkpoints(options_.checkpoint_every);
    }
    alive_.assign(n, true);
    steps_started_.assign(n, 0);
    losses_.resize(n);
    stepping_.resize(n);
    snapshots_.resize(n);
}

void Harness::fail_check(const std::string& what) {
    throw std::logic_error("harness: " + what);
}

void Harness::restore(int rank, const proto::Snapshot& snapshot) {
    if (started_) fail_check("restore() after run()");
    const std::string label = "rank " + str(rank) + "'s snapshot at step " + str(snapshot.step);
    protocols_[idx(rank)]->restore(label,
                                   std::string_view(snapshot.state.data(), snapshot.state.size()));
}

bool Harness::all_done() const {
    for (int r = 0; r < size(); ++r)
        if (alive_[idx(r)] && !protocols_[idx(r)]->done()) return false;
    return true;
}

std::vector<float> Harness::model(int r) const {
    std::vector<float> x(workers_[idx(r)]->size());
    protocols_[idx(r)]->current_model(x);
    return x;
}

std::vector<const proto::Message*> Harness::in_flight() const {
    std::vector<const proto::Message*> v;
    for (const auto& [key, e] : queue_)
        if (e.type == Event::message) v.push_back(&e.msg);
    return v;
}

bool Harness::run(const std::function<bool()>& stop) {
    if (!started_) {
        started_ = true;
        for (int r = 0; r < size(); ++r) {
            proto::Actions out;
            protocols_[idx(r)]->start(now_, out);
            apply(r, out);
        }
    }
    while (!(stop && stop())) {
        if (!deliver_one()) break;
    }
    return all_done();
}

void Harness::fail(int rank) {
    alive_[idx(rank)] = false;
    const bool ticks = options_.clock == Clock::ticks;
    std::vector<Event> refused;
    for (auto it = queue_.begin(); it != queue_.end();) {
        Event& e = it->second;
        if (e.rank != rank) {
            ++it;
            continue;
        }
        if (e.type == Event::message) {
            // Ticks: the sender hears ok = false now. Seconds: its completion is queued
            // already and says ok = false when it comes.
            if (ticks && alive_[idx(e.from)] && options_.complete_sends)
                refused.push_back(completion(e.from, rank, e.id, false, now_));
            if (!ticks) undeliverable_.push_back(std::move(e.msg));
        }
        it = queue_.erase(it);
    }
    for (auto& e : refused) push(std::move(e));
    for (int r = 0; r < size(); ++r) {
        if (!alive_[idx(r)]) continue;
        proto::Actions out;
        protocols_[idx(r)]->peer_failed(now_, rank, out);
        apply(r, out);
    }
}

void Harness::kill(int rank, proto::Time at) {
    Event e;
    e.type = Event::kill;
    e.rank = rank;
    e.at = at;
    push(std::move(e));
}

ProtocolFactory registered(std::string name, const std::string& options) {
    std::optional<json::Node> node;
    if (!options.empty()) node.emplace(json::parse_text(options, name + " options"));
    return [name = std::move(name), node](proto::PeerContext ctx) {
        return proto::make_protocol(name, node ? &*node : nullptr, std::move(ctx));
    };
}

}  // namespace gossamer::testing
