#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gossamer/core/compute_model.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/rng.hpp"

using namespace gossamer;

namespace {

Cluster with_jitter(int n, Jitter j) {
    Cluster c = homogeneous_cluster(n, 0.25, 0.0, 1e9);
    for (auto& p : c.peers) p.jitter = j;
    return c;
}

struct Moments {
    double mean = 0, sd = 0, min = 1e300, max = -1e300;
};

Moments moments(const std::vector<double>& xs) {
    Moments m;
    for (double x : xs) {
        m.mean += x;
        m.min = std::min(m.min, x);
        m.max = std::max(m.max, x);
    }
    m.mean /= static_cast<double>(xs.size());
    for (double x : xs) m.sd += (x - m.mean) * (x - m.mean);
    m.sd = std::sqrt(m.sd / static_cast<double>(xs.size() - 1));
    return m;
}

std::vector<double> draws(const ComputeModel& m, int rank, int count) {
    std::vector<double> out;
    for (int k = 0; k < count; ++k) out.push_back(m.jitter(rank, k));
    return out;
}

}  // namespace

TEST_CASE("constant jitter: a step takes exactly base time x factor, whenever it starts") {
    Cluster c = homogeneous_cluster(3, 0.1, 0.0, 1e9);
    c.peers[1].factor = 4.0;
    const ComputeModel m(c, 7);
    for (std::int64_t k : {0, 1, 99}) {
        CHECK(m.jitter(1, k) == 1.0);
        CHECK(m.step_duration(1, k, 0.0) == 0.1 * 4.0);
        CHECK(m.step_duration(1, k, 123.456) == 0.1 * 4.0);
        CHECK(m.step_duration(0, k, 5.5) == 0.1);
    }
    CHECK(m.step_end(1, 0, 2.0) == 2.0 + 0.1 * 4.0);
}

TEST_CASE("a slow period stretches exactly the work done inside it") {
    // Period [8, 16) at factor 4; every value is a dyadic fraction, so results are exact.
    const std::vector<SlowPeriod> p = {{8.0, 16.0, 4.0}};
    CHECK(stretched_duration(0.0, 2.0, p) == 2.0);   // ends before: untouched
    CHECK(stretched_duration(6.0, 2.0, p) == 2.0);   // ends exactly at the start
    CHECK(stretched_duration(16.0, 2.0, p) == 2.0);  // starts exactly at the end
    CHECK(stretched_duration(10.0, 1.5, p) == 6.0);  // entirely inside: x f
    CHECK(stretched_duration(7.0, 2.0, p) == 5.0);   // 1 s before, 1 work unit inside: 1 + 4
    CHECK(stretched_duration(14.0, 2.0, p) == 3.5);  // 2 s inside do 0.5 work, 1.5 after
    CHECK(stretched_duration(6.0, 6.0, p) == 12.0);  // spans it: 6 + (1 - 1/4) x 8
    CHECK(stretched_duration(12.0, 1.0, p) == 4.0);  // ends exactly at the end: 1 x 4
    CHECK(stretched_duration(0.0, 0.0, p) == 0.0);

    // Two periods and an open one.
    const std::vector<SlowPeriod> q = {{1.0, 2.0, 2.0}, {3.0, 4.0, 4.0}, {10.0, never, 8.0}};
    // From 0: 1 free, 1 s at f 2 (0.5 work), 1 free, 1 s at f 4 (0.25 work), 1 free = 3.75 work.
    CHECK(stretched_duration(0.0, 3.75, q) == 5.0);
    CHECK(stretched_duration(9.0, 2.0, q) == 1.0 + 8.0);  // 1 free, then 1 work at f 8 forever

    // The closed form D = W + (1 - 1/f) x T_in for random starts and works, T_in the part of
    // [start, start + D) inside the period.
    gossamer::Rng rng(3);
    for (int i = 0; i < 2000; ++i) {
        const double start = 30.0 * rng.uniform(), w = 10.0 * rng.uniform();
        const double d = stretched_duration(start, w, p);
        const double inside = std::max(0.0, std::min(start + d, 16.0) - std::max(start, 8.0));
        CHECK(d == doctest::Approx(w + (1.0 - 1.0 / 4.0) * inside).epsilon(1e-12));
    }
}

TEST_CASE("slow periods apply by virtual time through the compute model") {
    Cluster c = homogeneous_cluster(2, 0.5, 0.0, 1e9);
    c.peers[1].factor = 2.0;  // work 1.0 per step
    c.peers[1].slow = {{4.0, 8.0, 3.0}};
    const ComputeModel m(c, 1);
    CHECK(m.step_duration(1, 0, 0.0) == 1.0);
    CHECK(m.step_duration(1, 0, 5.0) == 3.0);
    CHECK(m.step_duration(1, 0, 3.5) == 0.5 + 0.5 * 3.0);
    CHECK(m.step_duration(0, 0, 5.0) == 0.5);  // the other peer is not slowed
}

TEST_CASE("lognormal jitter has mean 1 and the configured sigma") {
    const ComputeModel m(with_jitter(2, {JitterKind::lognormal, 0.5, 0.0}), 11);
    const std::vector<double> j = draws(m, 0, 100000);
    const Moments mj = moments(j);
    CHECK(mj.mean == doctest::Approx(1.0).epsilon(0.01));
    std::vector<double> logs;
    for (double x : j) logs.push_back(std::log(x));
    const Moments ml = moments(logs);
    CHECK(ml.mean == doctest::Approx(-0.125).epsilon(0.05));  // -sigma^2 / 2: mean-1, not median-1
    CHECK(ml.sd == doctest::Approx(0.5).epsilon(0.01));
    // The work of a step is base x factor x J.
    CHECK(m.work(0, 17) == 0.25 * m.jitter(0, 17));
}

TEST_CASE("uniform jitter has mean 1 and stays within its width") {
    const ComputeModel m(with_jitter(1, {JitterKind::uniform, 0.0, 0.25}), 5);
    const Moments mj = moments(draws(m, 0, 100000));
    CHECK(mj.mean == doctest::Approx(1.0).epsilon(0.003));
    CHECK(mj.sd == doctest::Approx(0.25 / std::sqrt(3.0)).epsilon(0.01));
    CHECK(mj.min >= 0.75);
    CHECK(mj.min < 0.751);
    CHECK(mj.max < 1.25);
    CHECK(mj.max > 1.249);
}

TEST_CASE("jitter is a pure function of (seed, rank, step)") {
    const Cluster c = with_jitter(4, {JitterKind::lognormal, 0.5, 0.0});
    const ComputeModel a(c, 42), b(c, 42), other(c, 43);
    CHECK(a.jitter(2, 9) == b.jitter(2, 9));
    const double late = a.jitter(3, 1000);
    CHECK(a.jitter(3, 5) == b.jitter(3, 5));  // asking in another order changes nothing
    CHECK(late == b.jitter(3, 1000));
    int same = 0;
    for (int k = 0; k < 100; ++k) same += a.jitter(1, k) == other.jitter(1, k);
    CHECK(same == 0);  // another seed, other draws
    // A rank's draws do not depend on how many peers there are.
    const ComputeModel big(with_jitter(16, {JitterKind::lognormal, 0.5, 0.0}), 42);
    CHECK(big.jitter(3, 77) == a.jitter(3, 77));
}

TEST_CASE("different ranks draw independently") {
    const ComputeModel m(with_jitter(2, {JitterKind::uniform, 0.0, 0.5}), 9);
    const int count = 20000;
    const std::vector<double> x = draws(m, 0, count), y = draws(m, 1, count);
    const Moments mx = moments(x), my = moments(y);
    double cov = 0.0, lag = 0.0;
    for (int k = 0; k < count; ++k) cov += (x[k] - mx.mean) * (y[k] - my.mean);
    for (int k = 1; k < count; ++k) lag += (x[k] - mx.mean) * (x[k - 1] - mx.mean);
    CHECK(std::abs(cov / (count - 1) / (mx.sd * my.sd)) < 0.03);  // 4 standard errors
    CHECK(std::abs(lag / (count - 2) / (mx.sd * mx.sd)) < 0.03);  // nor across steps
    int same = 0;
    for (int k = 0; k < count; ++k) same += x[k] == y[k];
    CHECK(same == 0);
}

TEST_CASE("failure times and bad arguments") {
    Cluster c = homogeneous_cluster(3, 0.1, 0.0, 1e9);
    c.peers[2].fail_at = 12.5;
    const ComputeModel m(c, 1);
    CHECK(m.failure_time(2) == 12.5);
    CHECK(m.failure_time(0) == never);
    CHECK_THROWS_AS(m.step_duration(3, 0, 0.0), gossamer::Error);
    CHECK_THROWS_AS(m.failure_time(-1), gossamer::Error);
    CHECK_THROWS_AS(ComputeModel(Cluster{}, 1), gossamer::Error);
}
