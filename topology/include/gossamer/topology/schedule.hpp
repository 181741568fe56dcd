#pragma once
/// Time-varying topologies: the graph and mixing matrix of every round t.
///
/// A Schedule is either periodic (a static graph has period 1; an explicit schedule or a
/// generated family such as one-peer exponential repeats after `period()` rounds) or random with
/// no period (random matching). at(t) is cheap: periodic schedules keep their rounds, random ones
/// build round t from (seed, t) on demand; nothing materialises an unbounded sequence.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gossamer/topology/graph.hpp"
#include "gossamer/topology/weights.hpp"

namespace gossamer::topology {

/// One round: who sends to whom, and with which weights.
struct Round {
    Digraph graph;
    MixingMatrix weights;
};

class Schedule {
  public:
    virtual ~Schedule() = default;
    virtual int n() const = 0;
    /// Rounds after which the schedule repeats; nullopt for a random schedule with no period.
    virtual std::optional<std::int64_t> period() const = 0;
    /// Round t (t >= 0). Thread-safe; the result stays valid while the caller holds it.
    virtual std::shared_ptr<const Round> at(std::int64_t t) const = 0;
    /// Whether rows (averaging) or columns (push-sum) of every W sum to 1.
    virtual WeightKind kind() const = 0;
    /// Human-readable name, e.g. "one_peer_exponential (n = 16)".
    virtual std::string describe() const = 0;

    /// The base graph: the union of the rounds over one period (a schedule with no period: its
    /// first kBaseRounds rounds; at most kMaxBaseRounds either way). Computed once, on first use,
    /// and shared by every caller (thread-safe): the simulator's n peers read one copy instead
    /// of building n (docs/modules/simulator.md, "Scale").
    const Digraph& base_graph() const;
    static constexpr std::int64_t kBaseRounds = 64;
    static constexpr std::int64_t kMaxBaseRounds = 4096;

    /// A check of the whole schedule that every peer of a job would otherwise repeat (sgp's
    /// column sums, gadmm's chain): `check` runs once per `key` and returns what is wrong, or an
    /// empty string; every later call with the same key returns the first answer. n peers in one
    /// process (the simulator) pay for one check instead of n, each O(n) (thread-safe).
    std::string check_once(std::string_view key, const std::function<std::string()>& check) const;

  private:
    mutable std::once_flag base_once_;
    mutable Digraph base_;
    mutable std::mutex checks_mutex_;
    mutable std::vector<std::pair<std::string, std::string>> checks_;  // key, what is wrong
};

/// A schedule that cycles through the given rounds (all with the same n). A single round is a
/// static topology. Each round's weights are checked against `kind`.
std::shared_ptr<const Schedule> make_periodic(std::vector<Round> rounds, WeightKind kind,
                                              std::string description);

/// Parameters of a generated family.
struct FamilySpec {
    std::string family;      ///< one of family_names()
    int n = 0;               ///< number of peers
    std::uint64_t seed = 1;  ///< random_matching, erdos_renyi
    int rows = 0, cols = 0;  ///< torus; 0 = the most square factorisation of n
    double p = 0.0;          ///< erdos_renyi edge probability
    WeightRule weights = WeightRule::uniform;
};

/// The generated families: ring, torus, hypercube, complete, star, exponential,
/// symmetric_exponential, one_peer_exponential, random_matching, erdos_renyi.
std::span<const std::string_view> family_names() noexcept;
bool is_family(std::string_view name) noexcept;

/// Builds the schedule of a family. Throws TopologyError for invalid parameters (n not a power of
/// two where one is needed, a disconnected Erdős–Rényi draw, weights the graph cannot take).
std::shared_ptr<const Schedule> generate(const FamilySpec& spec);

}  // namespace gossamer::topology
