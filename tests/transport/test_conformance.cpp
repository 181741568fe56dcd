// One conformance suite for every backend (TEST_CASE_TEMPLATE over TRANSPORT_BACKENDS).
#include <doctest/doctest.h>

#include <cstring>
#include <numeric>

#include "backends.hpp"
#include "gossamer/transport/wire.hpp"

using namespace transport_test;

namespace {

std::vector<float> pattern(std::size_t n, float seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i % 1000);
    return v;
}

}  // namespace

TEST_CASE_TEMPLATE("messages arrive in order per pair with every header field", B,
                   TRANSPORT_BACKENDS) {
    const int n = 3;
    const std::uint64_t per_pair = 200;
    auto peers = B::make(n);
    std::map<std::pair<int, int>, std::vector<tr::Message>> got;  // (from, to)
    for (int r = 0; r < n; ++r)
        peers[r]->on_receive([&, r](tr::Message&& m) {
            got[{m.sender, r}].push_back(std::move(m));
        });
    Completions c;
    std::vector<std::vector<float>> payloads;
    payloads.reserve(n * n * per_pair);
    for (std::uint64_t s = 0; s < per_pair; ++s)
        for (int from = 0; from < n; ++from)
            for (int to = 0; to < n; ++to) {
                if (from == to) continue;
                payloads.push_back(pattern(s % 7, static_cast<float>(s)));
                peers[from]->send(header(to, s, s % 7), bytes_of(payloads.back()),
                                  c.make(payloads.size()));
            }
    REQUIRE(pump(peers, [&] {
        std::size_t total = 0;
        for (auto& [k, v] : got) total += v.size();
        return c.all_done() && total == n * (n - 1) * per_pair;
    }));
    CHECK(c.exactly_once());
    for (auto& [id, s] : c.status) CHECK(s.ok());
    for (auto& [pair, msgs] : got) {
        CAPTURE(pair.first);
        CAPTURE(pair.second);
        for (std::uint64_t s = 0; s < msgs.size(); ++s) {
            const auto& m = msgs[s];
            const auto want = header(pair.second, s, s % 7);
            REQUIRE(m.edge_seq == s);
            CHECK(m.sender == pair.first);
            CHECK(m.receiver == pair.second);
            CHECK(m.kind == want.kind);
            CHECK(m.round == want.round);
            CHECK(m.partition == want.partition);
            CHECK(m.chunk == want.chunk);
            CHECK(m.offset == want.offset);
            CHECK(m.codec == want.codec);
            CHECK(m.weight == want.weight);
            CHECK(m.sent_at == want.sent_at);
            CHECK(m.elements == s % 7);
            CHECK(m.payload == pattern(s % 7, static_cast<float>(s)));
        }
    }
    CHECK(peers[0]->drops().total() == 0);
}

TEST_CASE_TEMPLATE("a 64 MiB payload, a zero-length one and a reused receive buffer", B,
                   TRANSPORT_BACKENDS) {
    auto peers = B::make(2);
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    const std::size_t big = (64u << 20) / sizeof(float);
    std::vector<float> payload(big);
    std::iota(payload.begin(), payload.end(), 0.0f);
    Completions c;
    peers[0]->send(header(1, 0, big), bytes_of(payload), c.make(0));
    peers[0]->send(header(1, 1, 0), {}, c.make(1));
    REQUIRE(pump(peers, [&] { return c.all_done() && got.size() == 2; }));
    CHECK(c.exactly_once());
    CHECK(c.status[0].ok());
    CHECK(c.status[1].ok());
    REQUIRE(got[0].payload.size() == big);
    CHECK(std::memcmp(got[0].payload.data(), payload.data(), big * sizeof(float)) == 0);
    CHECK(got[1].payload.empty());
    CHECK(got[1].elements == 0);
    // The next round of the same size lands in the recycled buffer.
    const float* first = got[0].payload.data();
    peers[1]->recycle(std::move(got[0].payload));
    payload[12345] = -1.0f;
    peers[0]->send(header(1, 2, big), bytes_of(payload), c.make(2));
    REQUIRE(pump(peers, [&] { return c.all_done() && got.size() == 3; }));
    CHECK(got[2].payload.data() == first);
    CHECK(got[2].payload[12345] == -1.0f);
    CHECK(c.exactly_once());
}

TEST_CASE_TEMPLATE("many concurrent sends of mixed sizes all complete once and arrive", B,
                   TRANSPORT_BACKENDS) {
    const int n = 4;
    const int per_peer = 48;
    auto peers = B::make(n);
    std::vector<std::size_t> received(n);
    std::vector<std::uint64_t> bytes(n);
    for (int r = 0; r < n; ++r)
        peers[r]->on_receive([&, r](tr::Message&& m) {
            received[r]++;
            bytes[r] += m.payload.size() * sizeof(float);
            peers[r]->recycle(std::move(m.payload));
        });
    Completions c;
    std::vector<std::vector<float>> payloads;
    payloads.reserve(n * (n - 1) * per_peer);
    std::uint64_t expect_bytes = 0;
    for (int k = 0; k < per_peer; ++k)
        for (int from = 0; from < n; ++from)
            for (int to = 0; to < n; ++to) {
                if (from == to) continue;
                const std::size_t len = std::size_t{1} << (k % 17);  // 1 .. 64 Ki floats
                payloads.push_back(pattern(len, 1.0f));
                expect_bytes += len * sizeof(float);
                peers[from]->send(header(to, static_cast<std::uint64_t>(k), len),
                                  bytes_of(payloads.back()), c.make(payloads.size()));
            }
    REQUIRE(pump(peers, [&] {
        return c.all_done() &&
               std::accumulate(received.begin(), received.end(), std::size_t{0}) == c.issued;
    }));
    CHECK(c.exactly_once());
    for (auto& [id, s] : c.status) CHECK(s.ok());
    CHECK(std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0}) == expect_bytes);
    for (int r = 0; r < n; ++r) CHECK(peers[r]->counters().messages_received == received[r]);
}

TEST_CASE_TEMPLATE("a peer that disappears fails within the timeout and only its partner sees it",
                   B, TRANSPORT_BACKENDS) {
    const auto timeout = 400ms;
    auto peers = B::make(3, timeout);
    std::vector<tr::Status> failed0, failed2;
    peers[0]->on_peer_failed([&](const tr::Status& s) { failed0.push_back(s); });
    peers[2]->on_peer_failed([&](const tr::Status& s) { failed2.push_back(s); });
    std::vector<int> got(3);
    for (int r = 0; r < 3; ++r) peers[r]->on_receive([&, r](tr::Message&&) { got[r]++; });
    // Warm up every pair first, so that the endpoints are wired.
    std::vector<float> small(4, 1.0f), large((1u << 20) / sizeof(float), 2.0f);
    Completions warm;
    for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b)
            if (a != b)
                peers[a]->send(header(b, 0, small.size()), bytes_of(small), warm.make(a * 3 + b));
    REQUIRE(pump(peers, [&] { return warm.all_done() && got[0] + got[1] + got[2] == 6; }));

    peers[1].reset();  // vanishes without a word
    Completions c;
    const auto t0 = tr::Clock::now();
    peers[0]->send(header(1, 1, large.size()), bytes_of(large), c.make(0));
    REQUIRE(pump(
        peers, [&] { return c.all_done(); }, timeout * 5));
    const auto took = tr::Clock::now() - t0;
    CHECK(took < timeout * 2);
    CHECK(!c.status[0].ok());
    CHECK(c.status[0].peer == 1);
    CHECK(c.status[0].reason.find("peer 1") != std::string::npos);
    REQUIRE(pump(
        peers, [&] { return !failed0.empty(); }, timeout));
    CHECK(failed0.size() == 1);
    CHECK(failed0[0].peer == 1);
    CHECK(peers[0]->peer_failed(1));
    CHECK_FALSE(peers[0]->peer_failed(2));

    // The others are unaffected, and a later send to the dead peer fails at once.
    peers[0]->send(header(2, 1, small.size()), bytes_of(small), c.make(1));
    peers[2]->send(header(0, 1, small.size()), bytes_of(small), c.make(2));
    peers[0]->send(header(1, 2, small.size()), bytes_of(small), c.make(3));
    REQUIRE(pump(peers, [&] { return c.all_done() && got[0] == 3 && got[2] == 3; }));
    CHECK(c.status[1].ok());
    CHECK(c.status[2].ok());
    CHECK(c.status[3].code == tr::Errc::peer_failed);
    CHECK(c.exactly_once());
    CHECK(warm.exactly_once());
    for (auto& s : failed2) CHECK(s.peer == 1);  // 2 may learn of 1 too, never of 0
}

TEST_CASE_TEMPLATE("malformed headers are dropped and counted per reason, never delivered", B,
                   TRANSPORT_BACKENDS) {
    auto peers = B::make(2);
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    std::vector<float> payload(8, 3.0f);
    auto encode = [&](tr::Message m, std::uint64_t job = kJob) {
        m.sender = 0;
        std::vector<std::byte> h(tr::kHeaderBytes);
        tr::encode_header(m, job, std::span<std::byte, tr::kHeaderBytes>(h));
        return h;
    };
    auto good = encode(header(1, 0, payload.size()));
    auto bad_magic = good;
    bad_magic[0] = std::byte{0};
    auto bad_version = good;
    bad_version[4] = std::byte{99};
    auto bad_kind = good;
    bad_kind[6] = std::byte{42};
    auto wrong_job = encode(header(1, 0, payload.size()), kJob + 1);
    auto wrong_receiver = encode(header(0, 0, payload.size()));
    auto too_many = encode(header(1, 0, payload.size() + 1));  // announces more than arrives
    std::vector<std::byte> short_header(good.begin(), good.begin() + 20);
    Completions c;
    const auto p = bytes_of(payload);
    peers[0]->send_raw_for_testing(1, bad_magic, p, c.make(0));
    peers[0]->send_raw_for_testing(1, bad_version, p, c.make(1));
    peers[0]->send_raw_for_testing(1, bad_kind, p, c.make(2));
    peers[0]->send_raw_for_testing(1, wrong_job, p, c.make(3));
    peers[0]->send_raw_for_testing(1, wrong_receiver, p, c.make(4));
    peers[0]->send_raw_for_testing(1, too_many, p, c.make(5));
    peers[0]->send_raw_for_testing(1, short_header, p, c.make(6));
    peers[0]->send_raw_for_testing(1, good, p.first(5), c.make(7));  // odd byte count
    peers[0]->send_raw_for_testing(1, good, p, c.make(8));           // the one good message
    REQUIRE(pump(
        peers, [&] { return c.all_done() && peers[1]->drops().total() == 8 && got.size() == 1; }));
    const auto& d = peers[1]->drops();
    CHECK(d[tr::DropReason::bad_magic] == 1);
    CHECK(d[tr::DropReason::bad_version] == 1);
    CHECK(d[tr::DropReason::bad_kind] == 1);
    CHECK(d[tr::DropReason::wrong_job] == 1);
    CHECK(d[tr::DropReason::wrong_receiver] == 1);
    CHECK(d[tr::DropReason::bad_size] == 2);
    CHECK(d[tr::DropReason::short_header] == 1);
    CHECK(got[0].payload == payload);
    CHECK(c.exactly_once());
    CHECK_FALSE(peers[1]->peer_failed(0));  // a malformed message does not fail its sender
}

TEST_CASE_TEMPLATE("messages from a peer this one failed are dropped and counted, never delivered",
                   B, TRANSPORT_BACKENDS) {
    // A peer the job declared lost may still reach this one (its endpoint is open): what it
    // sends is not applied (its weight is gone) but counted as not_member.
    auto peers = B::make(2);
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    peers[1]->fail_peer(0, "declared lost by the job");
    Completions c;
    const std::vector<float> payload(16, 1.0f);
    for (std::uint64_t s = 0; s < 3; ++s)
        peers[0]->send(header(1, s, payload.size()), bytes_of(payload), c.make(s));
    REQUIRE(pump(
        peers, [&] { return c.all_done() && peers[1]->drops()[tr::DropReason::not_member] == 3; }));
    CHECK(got.empty());
    CHECK(peers[1]->drops().total() == 3);
    CHECK(tr::to_string(tr::DropReason::not_member) == "from a failed peer");
}

TEST_CASE_TEMPLATE("a message above the payload limit or from a rank outside the job is dropped", B,
                   TRANSPORT_BACKENDS) {
    // Security (docs/operations/reliability.md): a joined peer's limit is the model's largest
    // message (largest_payload_bytes); a longer one is dropped on its header, before its payload is
    // received or allocated. A sender field that names no other rank of the job is dropped too.
    const std::uint64_t limit = tr::largest_payload_bytes(16);  // 192 bytes
    auto peers = B::make(2, 5000ms, limit);
    std::vector<tr::Message> got;
    peers[1]->on_receive([&](tr::Message&& m) { got.push_back(std::move(m)); });
    const std::vector<float> at_limit(limit / 4, 1.0f), above(limit / 4 + 1, 2.0f);
    auto encode = [&](int sender) {
        tr::Message m = header(1, 0, 4);
        m.sender = sender;
        std::vector<std::byte> h(tr::kHeaderBytes);
        tr::encode_header(m, kJob, std::span<std::byte, tr::kHeaderBytes>(h));
        return h;
    };
    const std::vector<float> four(4, 3.0f);
    Completions c;
    peers[0]->send(header(1, 0, above.size()), bytes_of(above), c.make(0));
    peers[0]->send(header(1, 1, at_limit.size()), bytes_of(at_limit), c.make(1));
    peers[0]->send_raw_for_testing(1, encode(7), bytes_of(four), c.make(2));   // not a rank
    peers[0]->send_raw_for_testing(1, encode(-1), bytes_of(four), c.make(3));  // not a rank
    peers[0]->send_raw_for_testing(1, encode(1), bytes_of(four), c.make(4));   // itself
    REQUIRE(pump(
        peers, [&] { return c.all_done() && peers[1]->drops().total() == 4 && got.size() == 1; }));
    const auto& d = peers[1]->drops();
    CHECK(d[tr::DropReason::bad_size] == 1);
    CHECK(d[tr::DropReason::wrong_sender] == 3);
    CHECK(got[0].payload == at_limit);
    CHECK(c.exactly_once());
}

TEST_CASE_TEMPLATE("sends to an unknown rank and sends pending at close complete once", B,
                   TRANSPORT_BACKENDS) {
    Completions c;
    {
        auto peers = B::make(2);
        std::vector<float> payload(16, 1.0f);
        peers[0]->send(header(7, 0, payload.size()), bytes_of(payload), c.make(0));
        peers[0]->send(header(0, 0, payload.size()), bytes_of(payload), c.make(1));  // itself
        REQUIRE(pump(peers, [&] { return c.done() == 2; }));
        CHECK(c.status[0].code == tr::Errc::peer_failed);
        CHECK(c.status[0].reason.find("peer 7") != std::string::npos);
        CHECK(c.status[1].code == tr::Errc::peer_failed);
        for (int k = 0; k < 8; ++k)
            peers[0]->send(header(1, 0, payload.size()), bytes_of(payload), c.make(10 + k));
        peers.clear();  // whatever is still pending completes inside the destructor
    }
    CHECK(c.all_done());
    CHECK(c.exactly_once());
}
