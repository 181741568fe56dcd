#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/lr_schedule.hpp"

using namespace gossamer::optim;
using doctest::Approx;

TEST_CASE("constant schedule") {
    LrSchedule s({}, 0.1);
    CHECK(s.at(0) == 0.1);
    CHECK(s.at(123456) == 0.1);
}

TEST_CASE("step schedule multiplies by gamma every step_size steps") {
    LrSchedule s({.kind = ScheduleKind::step, .step_size = 10, .gamma = 0.5}, 1.0);
    CHECK(s.at(0) == 1.0);
    CHECK(s.at(9) == 1.0);
    CHECK(s.at(10) == 0.5);
    CHECK(s.at(19) == 0.5);
    CHECK(s.at(25) == 0.25);
}

TEST_CASE("cosine schedule falls from the base rate to the floor over total_steps") {
    LrSchedule s({.kind = ScheduleKind::cosine, .total_steps = 100, .min_lr = 0.1}, 1.0);
    CHECK(s.at(0) == Approx(1.0));
    CHECK(s.at(50) == Approx(0.55));
    CHECK(s.at(25) == Approx(0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2));
    CHECK(s.at(100) == Approx(0.1));
    CHECK(s.at(1000) == Approx(0.1));
}

TEST_CASE("linear warm-up composes with cosine and step") {
    LrSchedule c(
        {.kind = ScheduleKind::cosine, .warmup_steps = 10, .total_steps = 110, .min_lr = 0.1}, 1.0);
    CHECK(c.at(0) == Approx(0.1));
    CHECK(c.at(4) == Approx(0.5));
    CHECK(c.at(9) == Approx(1.0));
    CHECK(c.at(10) == Approx(1.0));
    CHECK(c.at(60) == Approx(0.55));
    CHECK(c.at(110) == Approx(0.1));

    LrSchedule s({.kind = ScheduleKind::step, .warmup_steps = 4, .step_size = 10, .gamma = 0.5},
                 2.0);
    CHECK(s.at(1) == Approx(1.0));
    CHECK(s.at(4) == Approx(2.0));
    CHECK(s.at(13) == Approx(2.0));
    CHECK(s.at(14) == Approx(1.0));

    LrSchedule k({.warmup_steps = 5}, 1.0);
    CHECK(k.at(2) == Approx(0.6));
    CHECK(k.at(5) == 1.0);
}

TEST_CASE("bad programmatic schedules are ConfigErrors naming the schedule key") {
    auto message = [](const ScheduleConfig& c, double lr) {
        try {
            LrSchedule s(c, lr);
        } catch (const gossamer::ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(message({.kind = ScheduleKind::step}, 1.0).find("schedule.step_size: ") == 0);
    CHECK(message({.kind = ScheduleKind::step, .step_size = 5, .gamma = 0}, 1.0)
              .find("schedule.gamma: ") == 0);
    CHECK(message({.kind = ScheduleKind::cosine, .warmup_steps = 10, .total_steps = 10}, 1.0)
              .find("schedule.total_steps: ") == 0);
    CHECK(message({.kind = ScheduleKind::cosine, .total_steps = 10, .min_lr = 2}, 1.0)
              .find("schedule.min_lr: ") == 0);
    CHECK(message({.warmup_steps = -1}, 1.0).find("schedule.warmup_steps: ") == 0);
    CHECK(message({.gamma = 0.5}, 1.0).find("schedule.gamma: ") == 0);
    CHECK(message({}, 0.0).find("optimizer.lr: ") == 0);
}

TEST_CASE("a base rate near DBL_MAX stays finite under cosine and warm-up (no overflow)") {
    const double huge = 1e308;
    LrSchedule cosine({.kind = ScheduleKind::cosine, .total_steps = 100}, huge);
    LrSchedule warm({.warmup_steps = 10}, huge);
    for (std::int64_t t : {0, 1, 5, 9, 10, 50, 99, 100}) {
        CAPTURE(t);
        CHECK(std::isfinite(cosine.at(t)));
        CHECK(cosine.at(t) <= huge);
        CHECK(std::isfinite(warm.at(t)));
        CHECK(warm.at(t) <= huge);
    }
    CHECK(cosine.at(0) == huge);
    CHECK(warm.at(9) == huge);
}
