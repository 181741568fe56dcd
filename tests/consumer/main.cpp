// Uses the installed gossamer::topology: generates a ring and prints its SLEM.
#include <cstdio>

#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/schedule.hpp"

int main() {
    gossamer::topology::FamilySpec spec;
    spec.family = "ring";
    spec.n = 8;
    auto schedule = gossamer::topology::generate(spec);
    auto report = gossamer::topology::analyse(*schedule);
    std::printf("ring 8: slem %.4f\n", *report.slem);
    return 0;
}
