// A peer process's driver options, filled in one place (gossamer/peer/cluster_options.hpp).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "gossamer/peer/cluster_options.hpp"
#include "support/stderr_capture.hpp"

using namespace gossamer;
using namespace std::chrono_literals;

TEST_CASE("driver options without a cluster: natural speed, the timeouts, paths and trace") {
    peer::DriverSpec spec;
    spec.rank = 2;
    spec.metrics_path = "out/peer2.jsonl";
    spec.stall_timeout = 3s;
    spec.trace_path = "t.json";
    spec.trace_limit = 1000;
    const auto o = peer::driver_options(spec);
    CHECK(o.metrics_path == "out/peer2.jsonl");
    CHECK_FALSE(o.declared_step_time);
    CHECK_FALSE(o.link);
    CHECK(std::isinf(o.fail_at));
    CHECK(o.stall_timeout == 3s);
    CHECK(o.watchdog == 3s);  // a short --timeout still shows the watchdog's line first
    CHECK(o.trace_path == "t.json");
    CHECK(o.trace_limit == 1000);
    CHECK_FALSE(o.job_start);
    spec.stall_timeout = 60s;
    CHECK(peer::driver_options(spec).watchdog == 10s);
}

TEST_CASE("driver options from a cluster file: step times, links, failure and leave times") {
    auto cluster = std::make_shared<Cluster>(homogeneous_cluster(4, 0.5, 1e-3, 1e8));
    cluster->peers[1].fail_at = 5;
    cluster->peers[2].leave_at = 7;
    peer::DriverSpec spec;
    spec.cluster = cluster;
    spec.rank = 1;
    auto o = peer::driver_options(spec);
    REQUIRE(o.declared_step_time);
    CHECK(o.declared_step_time(0, 0) == doctest::Approx(0.5));
    REQUIRE(o.link);
    CHECK(o.link(0).latency == doctest::Approx(1e-3));
    CHECK(o.fail_at == 5);
    CHECK(std::isinf(o.leave_at));
    spec.rank = 2;
    CHECK(peer::driver_options(spec).leave_at == 7);

    SUBCASE("a process started after its failure time on the job's clock does not fail again") {
        spec.rank = 1;
        spec.job_start = std::chrono::system_clock::now() - 10s;
        test::StderrCapture err;
        o = peer::driver_options(spec);
        CHECK(o.job_start == spec.job_start);
        CHECK(std::isinf(o.fail_at));
        CHECK(err.text().find("[rank 1] started 10.") != std::string::npos);
        CHECK(err.text().find("this process does not fail again") != std::string::npos);
    }
    SUBCASE("one started before it keeps its failure time") {
        spec.rank = 1;
        spec.job_start = std::chrono::system_clock::now();
        o = peer::driver_options(spec);
        CHECK(o.fail_at == 5);
    }
}
