// `gossamer bench mix --device`: one line and exit 2 without CUDA support, for an unknown device
// or without a device (naming why); with a device, a report.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "mix_device.hpp"
#include "support/run.hpp"

namespace {
const std::string kBin = GOSSAMER_BINARY;

int lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}
}  // namespace

TEST_CASE("bench mix --device refuses an unknown device in one line") {
    auto r = gossamer::test::run(kBin + " bench mix --device tpu");
    CHECK(r.status == 2);
    CHECK(r.err.find("unknown device 'tpu'") != std::string::npos);
    CHECK(lines(r.err) == 1);
}

TEST_CASE("bench mix --device cuda runs the device rows, or says in one line why it cannot") {
    auto r = gossamer::test::run(kBin + " bench mix --device cuda --bytes 4MiB --repeats 2 --json");
    if (!gossamer::bench::cuda_built()) {
        CHECK(r.status == 2);
        CHECK(r.err.find("this build has no CUDA support") != std::string::npos);
        CHECK(lines(r.err) == 1);
    } else if (r.status != 0) {
        CHECK(r.status == 2);
        CHECK(r.err.find("no CUDA device") != std::string::npos);
        CHECK(lines(r.err) == 1);
        CHECK(r.out.empty());
    } else {
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["rows"].size() >= 10);
        for (const auto& row : j["rows"]) {
            CHECK(row["gb_per_s"].get<double>() > 0);
            CHECK(row["memcpy_gb_per_s"].get<double>() > 0);
        }
    }
}
