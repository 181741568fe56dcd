#pragma once
/// The registry: every algorithm by name, one entry each, in one list. The built-in entries are
/// listed one line each in optimizers/protocol/src/algorithm_list.hpp, and each is defined in its
/// own folder (optimizers/protocols/<name>/src/<name>_entry.cpp); an embedder or a test adds one
/// with register_algorithm (docs/algorithms/README.md, "Adding an algorithm").
///
/// Drivers (sim/, peer/, launch/, cli/) name no algorithm: what they must know before a protocol
/// exists (setup checks, timeouts, memory, elastic jobs) they ask its entry, through the
/// functions of questions.hpp; the rest they ask the Protocol object.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::proto {

/// Whether an algorithm can join, leave or rejoin a running job (docs/operations/elastic.md).
/// The order is that of the lists in messages: the readiest first.
enum class Elastic {
    always,      ///< with any options (async)
    by_default,  ///< at its default options; some options refuse (Protocol::elastic_refusal)
    by_option,   ///< only when an option turns it on (Algorithm::elastic_note says which)
    never,       ///< it cannot
};

/// The commands whose default algorithms an entry is among (Algorithm::defaults, a bit set).
enum DefaultIn : unsigned {
    default_for_peer = 1u,    ///< gossamer peer's --algorithm and gossamer::PeerOptions (one)
    default_for_sim = 2u,     ///< gossamer sim's --algorithms
    default_for_launch = 4u,  ///< gossamer launch's --algorithms
};

/// What a driver knows of a job before it builds the protocols: what an entry's questions read.
struct JobSetup {
    const json::Node* options = nullptr;           ///< the algorithm's options; nullptr: defaults
    const topology::Schedule* topology = nullptr;  ///< the job's topology (nullptr: unknown)
    bool multirate = false;                        ///< the training config has multirate partitions
    std::string config_file;  ///< the training config, for error lines ("" for none)
    std::string cluster;      ///< the cluster file, for error lines
};

/// One registered algorithm: its name, how to build it, and its answers to drivers' questions.
/// An empty question takes the default answer given with it.
struct Algorithm {
    using Factory =
        std::function<std::unique_ptr<Protocol>(const json::Node* options, PeerContext ctx)>;

    std::string name;     ///< the registry name: --algorithm, "algorithms": {"<name>": {...}}
    std::string summary;  ///< one line for --help, Python and docs/algorithms/README.md
    /// Builds one peer's protocol from its options (a JSON object, or nullptr for the
    /// defaults); throws ConfigError naming the option's path.
    Factory make;
    unsigned defaults = 0;  ///< DefaultIn bits
    Elastic elastic = Elastic::never;
    /// Elastic::by_option: how it is turned on, as lists of elastic algorithms say it
    /// ("with \"elastic\"").
    std::string elastic_note;
    /// Multirate partitions gossip each on its own round counter, period and compressor (else
    /// the algorithm gossips the whole model every round; docs/algorithms/multirate.md).
    bool per_partition_gossip = false;

    /// Before a job on a cluster with churn, once the name alone can churn (elastic != never):
    /// throws ConfigError naming the option (or "multirate") that keeps these options from
    /// joining and leaving. Default: nothing to refuse.
    std::function<void(const JobSetup&)> check_churn;
    /// The least seconds each step waits for messages when the links' least latency is
    /// `latency` (the simulator's run-time floor). Never asked with multirate partitions.
    /// Default: 0, no wait known.
    std::function<double(const JobSetup&, double latency)> wait_per_step;
    /// Model-sized copies of values each peer keeps for the protocol. Default: 1 + 3 x the
    /// topology's largest in-degree (replicas, receive buffers, messages in flight).
    std::function<double(const JobSetup&)> model_copies;
    /// The seconds a waiting peer gives a full copy before it asks again (resync_timeout), for
    /// protocols that resynchronise replicas with full copies; the simulator checks that one
    /// full model crosses the slowest link in less. Default: none.
    std::function<double(const json::Node* options)> resync_timeout;
    /// The outer layer (the config's "outer", docs/algorithms/outer.md): "" when the algorithm
    /// with these options takes its rounds, else one line saying why not and what to do.
    /// Default: "" (the layer is a worker around the peer's own, which every protocol that
    /// takes its step with LocalWorker::apply_gradient reaches).
    std::function<std::string(const json::Node* options)> outer_refusal;
};

/// Every registered algorithm: the built-in ones in the order of algorithm_list.hpp, then those
/// of register_algorithm in the order they came.
const std::vector<Algorithm>& algorithms();
/// The entry of `name`; throws ConfigError (path "algorithm") naming every known name.
const Algorithm& algorithm(std::string_view name);
/// The entry of `name`, or nullptr (a protocol built outside the registry).
const Algorithm* find_algorithm(std::string_view name) noexcept;
/// Adds an algorithm (embedders, tests), before any job uses the registry: the registry is not
/// locked. Throws Error for an empty name, a name with characters other than [a-z0-9_], a
/// missing factory, a name already registered or a second default_for_peer.
void register_algorithm(Algorithm entry);

/// Builds protocol `name` with its options (a JSON object, or nullptr for the defaults).
/// Throws ConfigError for an unknown name (algorithm()) or an option (naming its path).
std::unique_ptr<Protocol> make_protocol(std::string_view name, const json::Node* options,
                                        PeerContext ctx);
/// The names make_protocol knows, in the order of algorithms().
std::vector<std::string> protocol_names();

/// The default algorithm of gossamer peer and gossamer::PeerOptions (default_for_peer).
std::string default_algorithm();
/// The default algorithms of a command, comma-separated in registry order ("a,b,c").
std::string default_algorithms(DefaultIn command);

}  // namespace gossamer::proto
