#pragma once
// The recorded allocation bounds of the simulator's guard (tests/sim/alloc_bounds.json,
// docs/operations/testing.md "Allocation guard"): reading, checking and writing them. Pure: the
// runs are test_sim_alloc.cpp's.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gossamer::test {

/// The command that re-records the bounds, as every failure line names it.
inline constexpr const char* kRecordCommand =
    "GOSSAMER_RECORD_ALLOC=1 build/ci/tests/sim/test_sim_alloc";

/// One run's figures, each per simulated peer.
struct AllocFigures {
    double peak_bytes = 0;       ///< the most bytes the run held at once
    double allocated_bytes = 0;  ///< every byte it asked for
    double allocations = 0;      ///< calls to operator new
};

/// The names of AllocFigures' fields in the file, in order.
const std::vector<std::string>& alloc_figure_names();
double figure(const AllocFigures& f, const std::string& name);

/// One algorithm's line in the file.
struct AllocEntry {
    int peers = 0;         ///< the run's peers (the file's default unless the entry sets it)
    std::string why;       ///< why this entry runs other than the default (empty: it does not)
    std::string topology;  ///< the graph it ran on, as the test chose it
    std::optional<AllocFigures> recorded, bound;
};

struct AllocBounds {
    int peers = 16384;
    int steps = 5;
    double headroom = 0.10;                                   ///< bound = recorded x (1 + headroom)
    nlohmann::json recorded_with = nlohmann::json::object();  ///< date, commit, compiler
    std::map<std::string, AllocEntry> algorithms;
};

/// Reads the file; throws std::runtime_error with one line naming the file, what is wrong and
/// how to re-record it.
AllocBounds load_alloc_bounds(const std::string& path);
/// Parses a document already read (`path` names it in errors).
AllocBounds parse_alloc_bounds(const std::string& text, const std::string& path);
nlohmann::json to_json(const AllocBounds& b);

/// The failure lines of one algorithm's figures against its entry: one line per figure over its
/// bound, naming the algorithm, the figure per peer, the bound, the figure it was recorded from
/// and how to re-record. Empty: within every bound.
std::vector<std::string> check_alloc(const std::string& algorithm, const AllocBounds& b,
                                     const AllocEntry& entry, const AllocFigures& measured);

/// A note (not a failure) for figures far below their recorded one (under 1 - 2 x headroom of
/// it), so that an improvement gets recorded and the bound tightened; empty otherwise.
std::string improvement_note(const std::string& algorithm, const AllocEntry& entry,
                             const AllocFigures& measured, double headroom);

/// The entry recorded from `measured`: its bound is measured x (1 + headroom), rounded up.
AllocEntry record_entry(AllocEntry entry, const AllocFigures& measured, double headroom);

}  // namespace gossamer::test
