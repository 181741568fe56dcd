#include <doctest/doctest.h>

#include "gossamer/core/error.hpp"

TEST_CASE("ConfigError formats file, path, problem and fix on one line") {
    gossamer::ConfigError e("a.json", "graph.family", "unknown family \"rng\"", "use ring");
    CHECK(std::string(e.what()) == "a.json: graph.family: unknown family \"rng\"; use ring");
    CHECK(e.file() == "a.json");
    CHECK(e.path() == "graph.family");
    gossamer::ConfigError bare("", "", "bad", "");
    CHECK(std::string(bare.what()) == "bad");
}

TEST_CASE("PeerFailure names the rank") {
    gossamer::PeerFailure f(3, "connection reset");
    CHECK(f.rank() == 3);
    CHECK(std::string(f.what()) == "peer 3 failed: connection reset");
}
