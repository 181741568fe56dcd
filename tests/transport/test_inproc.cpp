// What only the in-process backend has: a fabric that peers join.
#include <doctest/doctest.h>

#include "backends.hpp"
#include "gossamer/core/error.hpp"

using namespace transport_test;

TEST_CASE("inproc: a peer that never joined is unreachable, named in the failure") {
    auto fabric = tr::make_inproc_fabric(3);
    Peers peers;
    peers.push_back(tr::make_inproc_transport(fabric, options(0, 3)));
    peers.push_back(tr::make_inproc_transport(fabric, options(1, 3)));
    std::vector<tr::Status> failed;
    peers[0]->on_peer_failed([&](const tr::Status& s) { failed.push_back(s); });
    std::vector<float> payload(4, 1.0f);
    Completions c;
    peers[0]->send(header(2, 0, payload.size()), bytes_of(payload), c.make(0));
    peers[0]->send(header(1, 0, payload.size()), bytes_of(payload), c.make(1));
    REQUIRE(pump(peers, [&] { return c.all_done() && !failed.empty(); }));
    CHECK(c.status[0].code == tr::Errc::peer_failed);
    CHECK(c.status[0].reason == "peer 2: unreachable: it never joined the in-process fabric");
    CHECK(c.status[1].ok());
    CHECK(failed.size() == 1);
    CHECK(failed[0].peer == 2);
    CHECK(c.exactly_once());
}

TEST_CASE("inproc: joining twice or with the wrong size is refused") {
    auto fabric = tr::make_inproc_fabric(2);
    auto a = tr::make_inproc_transport(fabric, options(0, 2));
    CHECK_THROWS_AS(tr::make_inproc_transport(fabric, options(0, 2)), gossamer::TransportError);
    CHECK_THROWS_AS(tr::make_inproc_transport(fabric, options(1, 3)), gossamer::TransportError);
    CHECK_THROWS_AS(tr::make_inproc_transport(fabric, options(2, 2)), gossamer::TransportError);
}
