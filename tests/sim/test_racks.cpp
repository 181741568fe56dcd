// Racks (network.racks, docs/formats/cluster-format.md, "Racks"): the loader, and the fair and
// fifo network models, where a message between racks also crosses the sender's rack uplink and
// the receiver's rack downlink.
#include <doctest/doctest.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/sim/fair_network.hpp"
#include "gossamer/sim/network.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer;
using namespace gossamer::sim;

namespace {

std::string racks_file(const std::string& racks) {
    return R"({"network": {"latency": 0, "bandwidth": 4096, "racks": )" + racks +
           R"(}, "defaults": {"base_time": 0.1}})";
}

// The one-line ConfigError of loading `text` for 4 peers, the file's name replaced by "F".
std::string error_of(const std::string& text) {
    gossamer::test::TempDir dir;
    const std::string path = dir.write("c.json", text);
    try {
        load_cluster(path, 4);
    } catch (const ConfigError& e) {
        std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(!e.fix().empty());
        if (msg.rfind(path, 0) == 0) msg = "F" + msg.substr(path.size());
        return msg;
    }
    return "";
}

// Two racks of two, ranks {0, 1} and {2, 3}: access links of 4096 bytes/s, rack links of 1024.
Cluster two_racks() {
    return parse_cluster(json::parse_text(racks_file(R"([{"range": [0, 1], "uplink": 1024},
                                        {"ranks": [3, 2], "uplink": 1024, "downlink": 1024}])"),
                                          "c.json"),
                         4);
}

// Runs flows (from, to, bytes) started together at 0 through the fair model; their end times.
std::vector<Time> fair_ends(const Cluster& c, const std::vector<std::array<int, 3>>& flows) {
    FairNetwork net(c);
    std::map<std::uint32_t, std::size_t> index;
    for (std::size_t i = 0; i < flows.size(); ++i)
        index[net.start(flows[i][0], flows[i][1], std::uint64_t(flows[i][2]), 0.0)] = i;
    std::vector<Time> ends(flows.size(), -1.0);
    std::map<std::uint32_t, std::pair<std::uint32_t, Time>> latest;
    Time now = 0;
    while (net.in_flight() > 0) {
        std::vector<FairNetwork::Update> u;
        net.settle(now, u);
        for (const auto& x : u) latest[x.flow] = {x.version, x.end};
        auto first = latest.begin();
        for (auto it = latest.begin(); it != latest.end(); ++it)
            if (it->second.second < first->second.second) first = it;
        now = first->second.second;
        ends[index[first->first]] = now;
        net.finish(first->first, now);
        latest.erase(first);
    }
    return ends;
}

}  // namespace

TEST_CASE("racks: the loader reads ranks and ranges and rack links") {
    const Cluster c = two_racks();
    REQUIRE(c.racks.size() == 2);
    CHECK(c.racks[1].ranks == std::vector<int>{2, 3});
    CHECK(c.racks[0].downlink == 1024);  // the uplink's when not given
    CHECK(c.rack(0) == 0);
    CHECK(c.rack(3) == 1);
    CHECK(c.crosses_racks(1, 2));
    CHECK_FALSE(c.crosses_racks(2, 3));
    // A rank in no rack is its own: no shared link unless the other end is in a rack.
    const Cluster one = parse_cluster(
        json::parse_text(racks_file(R"([{"ranks": [0, 1], "uplink": 1024}])"), "c.json"), 4);
    CHECK(one.rack(2) == -1);
    CHECK_FALSE(one.crosses_racks(2, 3));
    CHECK(one.crosses_racks(0, 3));
    CHECK(homogeneous_cluster(4, 0.1, 0, 1e9).rack(2) == -1);
}

TEST_CASE("racks: bad racks get one line naming the file and the JSON path and the fix") {
    CHECK(error_of(racks_file(R"([{"ranks": [0, 1], "uplink": 1e6}, {"range": [1, 2],
                                  "uplink": 1e6}])")) ==
          "F: network.racks[1]: rank 1 is already in rack network.racks[0]; put every rank in at "
          "most one rack");
    CHECK(error_of(racks_file(R"([{"ranks": [0, 4], "uplink": 1e6}])"))
              .find("network.racks[0].ranks[1]: rank 4 is out of range for 4 peers") !=
          std::string::npos);
    CHECK(error_of(racks_file(R"([{"ranks": [0], "uplink": 0}])"))
              .find("network.racks[0].uplink: uplink must be > 0") != std::string::npos);
    CHECK(error_of(racks_file(R"([{"ranks": [0], "uplink": 1e6, "downlink": -1}])"))
              .find("network.racks[0].downlink") != std::string::npos);
    CHECK(error_of(racks_file(R"([{"ranks": [0], "uplink": 1e6, "speed": 1}])"))
              .find("network.racks[0].speed") != std::string::npos);
    CHECK(error_of(racks_file(R"([{"ranks": [0]}])")).find("network.racks[0]") !=
          std::string::npos);  // no uplink
    CHECK(error_of(racks_file(R"({"ranks": [0]})")).find("network.racks") != std::string::npos);
    CHECK(error_of(racks_file(R"([{"ranks": [0], "uplink": 1e6}])")).empty());
}

TEST_CASE("racks fair: two messages between racks share the rack uplink and one inside does not") {
    const Cluster c = two_racks();
    // S = 1024 bytes: two at once from rack 0 to rack 1 take 2 S / B = 2 s (B = 1024).
    CHECK(fair_ends(c, {{0, 2, 1024}, {1, 3, 1024}}) == std::vector<Time>{2.0, 2.0});
    // One alone takes S / B = 1 s: the rack link, not the access link, is its bottleneck.
    CHECK(fair_ends(c, {{0, 3, 1024}}) == std::vector<Time>{1.0});
    // Inside a rack: S / access link = 0.25 s.
    CHECK(fair_ends(c, {{0, 1, 1024}}) == std::vector<Time>{0.25});
    // Beside them, 2 -> 3 takes what 1 -> 3 leaves of 3's downlink: 4096 - 512.
    const auto mixed = fair_ends(c, {{2, 3, 1024}, {0, 2, 1024}, {1, 3, 1024}});
    CHECK(mixed[0] == doctest::Approx(1024.0 / 3584.0));
    CHECK(mixed[1] == 2.0);
    CHECK(mixed[2] == 2.0);
    // Opposite directions use different rack links: both at 1024.
    CHECK(fair_ends(c, {{0, 2, 1024}, {3, 1, 1024}}) == std::vector<Time>{1.0, 1.0});
}

TEST_CASE("racks fifo: messages between racks queue on the rack uplink") {
    const Cluster c = two_racks();
    Network net(c);
    CHECK(net.rate(0, 2) == 1024);
    CHECK(net.rate(0, 1) == 4096);
    CHECK(net.send(0, 2, 1024, 0.0) == 1.0);
    CHECK(net.send(1, 3, 1024, 0.0) == 2.0);  // behind the first on rack 0's uplink
    Network fresh(c);
    CHECK(fresh.send(1, 0, 1024, 0.0) == 0.25);  // inside rack 0: the access link
}
