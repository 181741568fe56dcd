// The in-process fabric: one mailbox per rank behind a mutex. A mailbox holds encoded headers
// (so the receiver checks them exactly as the UCX backend does) and owned payload copies.
#include "gossamer/transport/inproc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "gossamer/core/error.hpp"

namespace gossamer::transport {

namespace {

struct Item {
    int from = -1;
    std::vector<std::byte> header;
    std::vector<float> payload;
    std::int64_t bytes = 0;
};

enum class PeerState { absent, joined, left };

struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> items;
    std::vector<std::vector<float>> pool;  // recycled receive buffers
    PeerState state = PeerState::absent;
    bool woken = false;
};

}  // namespace

class InprocFabric {
  public:
    explicit InprocFabric(int size) : boxes_(static_cast<std::size_t>(size)) {}
    int size() const { return static_cast<int>(boxes_.size()); }
    Mailbox& box(int r) { return boxes_[static_cast<std::size_t>(r)]; }
    std::atomic<std::uint64_t> departures{0};

  private:
    std::deque<Mailbox> boxes_;
};

std::shared_ptr<InprocFabric> make_inproc_fabric(int size) {
    if (size < 1) throw TransportError(fmt::format("inproc: fabric size {} < 1", size));
    return std::make_shared<InprocFabric>(size);
}

namespace {

class InprocTransport final : public Transport {
  public:
    InprocTransport(std::shared_ptr<InprocFabric> fabric, TransportOptions o)
        : Transport(o), fabric_(std::move(fabric)) {
        if (fabric_->size() != o.size)
            throw TransportError(fmt::format("inproc: transport size {} but the fabric has {}",
                                             o.size, fabric_->size()));
        auto& me = fabric_->box(o.rank);
        std::lock_guard lock(me.mu);
        if (me.state != PeerState::absent)
            throw TransportError(fmt::format("inproc: rank {} joined the fabric before", o.rank));
        me.state = PeerState::joined;
    }

    ~InprocTransport() override {
        auto& me = fabric_->box(rank());
        {
            std::lock_guard lock(me.mu);
            me.state = PeerState::left;
            me.items.clear();
        }
        fabric_->departures.fetch_add(1);
        for (int r = 0; r < size(); ++r) {
            auto& b = fabric_->box(r);
            std::lock_guard lock(b.mu);
            b.woken = true;
            b.cv.notify_all();
        }
        run_deferred();
    }

    std::string_view backend() const noexcept override { return "inproc"; }

    // Inproc sends complete at once (the payload is copied), so they never time out.
    void send(const Message& header, std::span<const std::byte> payload, SendCallback done,
              Duration) override {
        assert(payload.size() == header.elements * sizeof(float));
        Message h = header;
        h.sender = rank();
        std::vector<std::byte> bytes(kHeaderBytes);
        encode_header(h, options_.job_id, std::span<std::byte, kHeaderBytes>(bytes));
        deliver(header.receiver, std::move(bytes), payload, std::move(done));
    }

    void send_raw_for_testing(int to, std::span<const std::byte> header,
                              std::span<const std::byte> payload, SendCallback done) override {
        deliver(to, {header.begin(), header.end()}, payload, std::move(done));
    }

    void on_receive(ReceiveCallback cb) override { on_receive_ = std::move(cb); }

    void recycle(std::vector<float>&& buffer) override {
        auto& me = fabric_->box(rank());
        std::lock_guard lock(me.mu);
        if (me.pool.size() < 16) me.pool.push_back(std::move(buffer));
    }

    bool progress() override {
        std::size_t n = report_departures();
        n += run_deferred();
        if (!on_receive_) return n > 0;
        auto& me = fabric_->box(rank());
        std::deque<Item> items;
        {
            std::lock_guard lock(me.mu);
            items.swap(me.items);
        }
        for (auto& it : items) {
            Message m;
            const bool from_failed = peer_failed(it.from);
            if (from_failed) drops_.add(DropReason::not_member);
            if (from_failed || !admit(it.header, it.from, it.bytes, m)) {
                recycle(std::move(it.payload));
                continue;
            }
            m.payload = std::move(it.payload);
            counters_.messages_received++;
            counters_.bytes_received += static_cast<std::uint64_t>(it.bytes);
            on_receive_(std::move(m));
        }
        return n + items.size() > 0;
    }

    void wait(Duration max) override {
        if (progress()) return;
        auto& me = fabric_->box(rank());
        {
            std::unique_lock lock(me.mu);
            me.cv.wait_for(lock, max, [&] { return me.woken || !me.items.empty(); });
            me.woken = false;
        }
        progress();
    }

    void wake() override {
        auto& me = fabric_->box(rank());
        std::lock_guard lock(me.mu);
        me.woken = true;
        me.cv.notify_all();
    }

    void fail_peer(int peer, std::string reason) override {
        set_failed(failure(Errc::peer_failed, peer, reason));
    }

  private:
    // Marks peers that left the fabric as failed (what a connection reset is to UCX).
    std::size_t report_departures() {
        const auto d = fabric_->departures.load();
        if (d == departures_seen_) return 0;
        departures_seen_ = d;
        std::size_t n = 0;
        for (int r = 0; r < size(); ++r) {
            if (r == rank() || peer_failed(r)) continue;
            auto& b = fabric_->box(r);
            std::unique_lock lock(b.mu);
            if (b.state != PeerState::left) continue;
            lock.unlock();
            n += set_failed(failure(Errc::peer_failed, r, "left the in-process fabric"));
        }
        return n;
    }

    void deliver(int to, std::vector<std::byte> header, std::span<const std::byte> payload,
                 SendCallback done) {
        if (to < 0 || to >= size() || to == rank()) {
            defer(std::move(done), failure(Errc::peer_failed, to, "no such peer to send to"));
            return;
        }
        if (peer_failed(to)) {
            defer(std::move(done), failed_status(to));
            return;
        }
        auto& b = fabric_->box(to);
        {
            std::unique_lock lock(b.mu);
            if (b.state != PeerState::joined) {
                const bool absent = b.state == PeerState::absent;
                lock.unlock();
                // Departures are reported in rank order, whether a send or progress() finds
                // them first (what a peer names as the first failure must not be a race).
                if (!absent) report_departures();
                set_failed(failure(Errc::peer_failed, to,
                                   absent ? "unreachable: it never joined the in-process fabric"
                                          : "left the in-process fabric"));
                defer(std::move(done), failed_status(to));
                return;
            }
            Item it;
            it.from = rank();
            it.header = std::move(header);
            it.bytes = static_cast<std::int64_t>(payload.size());
            const std::size_t floats = (payload.size() + sizeof(float) - 1) / sizeof(float);
            auto pooled = std::find_if(b.pool.begin(), b.pool.end(),
                                       [&](const auto& v) { return v.size() == floats; });
            if (pooled != b.pool.end()) {
                it.payload = std::move(*pooled);
                b.pool.erase(pooled);
            } else {
                it.payload.resize(floats);
            }
            if (!payload.empty()) std::memcpy(it.payload.data(), payload.data(), payload.size());
            b.items.push_back(std::move(it));
            b.cv.notify_all();
        }
        counters_.messages_sent++;
        counters_.bytes_sent += payload.size();
        defer(std::move(done), Status{});
    }

    std::shared_ptr<InprocFabric> fabric_;
    std::uint64_t departures_seen_ = 0;
    ReceiveCallback on_receive_;
};

}  // namespace

std::unique_ptr<Transport> make_inproc_transport(std::shared_ptr<InprocFabric> fabric,
                                                 TransportOptions options) {
    if (!fabric) throw TransportError("inproc: no fabric");
    return std::make_unique<InprocTransport>(std::move(fabric), options);
}

}  // namespace gossamer::transport
