#pragma once
/// The questions drivers ask of the registry by an algorithm's name, before its protocols exist:
/// each asks the entry (registry.hpp) and gives the default answer for an entry that leaves the
/// question empty and for a name the registry does not know (a protocol a test or an embedder
/// builds itself, SimSetup::protocol_factory). Messages keep one text for every algorithm.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/outer/outer_options.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::proto {

/// Whether `options` are an algorithm's defaults: none, or an empty JSON object.
bool default_options(const json::Node* options) noexcept;
/// The largest in-degree over one period of the schedule (at most 64 rounds of a random one).
int max_in_degree(const topology::Schedule& t);
/// Names in a sentence: "a", "a and b", "a, b and c" (word "and"); `serial_comma`: "a, b, and c".
std::string join_names(const std::vector<std::string>& names, std::string_view word,
                       bool serial_comma = false);

// Elastic jobs (docs/operations/elastic.md).
/// "" when algorithm `name` can join and leave a running job by its name alone (Elastic other
/// than never; its options may still refuse: Protocol::elastic_refusal); else one line saying
/// it cannot and which algorithms can.
std::string elastic_refusal(std::string_view name);
/// The algorithms that can join and leave a running job, readiest first (Elastic::always, then
/// by_default, then by_option), in registry order within each; `with_option`: by_option ones
/// too. Each is its name, followed by its elastic_note when `notes` ("allreduce with
/// \"elastic\"").
std::vector<std::string> elastic_algorithms(bool with_option, bool notes);
/// The first algorithm that joins and leaves with any options (Elastic::always): the one a
/// refusal suggests.
std::string elastic_choice();
/// Before a job on a cluster with churn, for an algorithm whose name can churn: Algorithm::
/// check_churn (ConfigError naming what refuses); nothing for a name the registry lacks.
void check_churn(std::string_view name, const JobSetup& setup);

// Multirate partitions (docs/algorithms/multirate.md).
/// The algorithms whose multirate partitions gossip on their own (per_partition_gossip).
std::vector<std::string> per_partition_algorithms();
/// ConfigError naming the partition when `m` gives a partition its own gossip period or
/// compressor and algorithm `name` gossips the whole model every round.
void check_multirate_algorithm(const optim::Multirate& m, std::string_view name);

// The outer layer (docs/algorithms/outer.md).
/// Algorithm::outer_refusal of `name` with `options`, or "" (a name the registry lacks).
std::string outer_refusal(std::string_view name, const json::Node* options);
/// ConfigError naming `config_file` and "outer" when `outer` is set (and not the identity) and
/// algorithm `name` with `options` refuses it.
void check_outer_algorithm(const std::optional<optim::OuterOptions>& outer, std::string_view name,
                           const json::Node* options, const std::string& config_file);
/// The algorithms that take "outer" at their default options, in registry order.
std::vector<std::string> outer_algorithms();

// Sizes and times (the simulator's checks before it runs; docs/modules/simulator.md, "Sizes").
/// Algorithm::wait_per_step of `name`, or 0.
double wait_per_step(std::string_view name, const JobSetup& setup, double latency);
/// Algorithm::model_copies of `name`, or its default (setup.topology needed).
double model_copies(std::string_view name, const JobSetup& setup);
/// Algorithm::resync_timeout of `name` with `options`, or nullopt when it has none.
std::optional<double> resync_timeout(std::string_view name, const json::Node* options);

}  // namespace gossamer::proto
