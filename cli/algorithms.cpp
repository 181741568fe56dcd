#include "algorithms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "args.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::cli {

std::vector<std::string> parse_algorithms(const std::string& list,
                                          const std::vector<std::string>& extra) {
    std::vector<std::string> algorithms;
    std::stringstream ss(list);
    auto known = proto::protocol_names();
    known.insert(known.end(), extra.begin(), extra.end());
    for (std::string item; std::getline(ss, item, ',');) {
        if (std::find(known.begin(), known.end(), item) == known.end()) {
            std::string all;
            for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
            throw UsageError(
                fmt::format("--algorithms: unknown algorithm \"{}\"; use {}", item, all));
        }
        // Each algorithm writes OUT/<algorithm>/: a second run of one would replace the first.
        if (std::find(algorithms.begin(), algorithms.end(), item) != algorithms.end())
            throw UsageError(fmt::format(
                "--algorithms: \"{}\" is listed twice, and each algorithm writes OUT/{}/; "
                "list each algorithm once",
                item, item));
        algorithms.push_back(item);
    }
    if (algorithms.empty()) throw UsageError("--algorithms: name at least one algorithm");
    return algorithms;
}

std::string algorithm_names() {
    std::string all;
    for (const auto& name : proto::protocol_names()) all += (all.empty() ? "" : ", ") + name;
    return all;
}

std::string algorithms_help() {
    std::string out = "\n\nalgorithms (docs/algorithms/README.md):";
    for (const auto& a : proto::algorithms())
        out += fmt::format("\n  {:<12} {}", a.name, a.summary);
    return out;
}

std::string default_sim_algorithms() {
    return proto::default_algorithms(proto::default_for_sim);
}

std::string default_launch_algorithms() {
    return proto::default_algorithms(proto::default_for_launch);
}

double eval_interval_option(const ParsedArgs& a) {
    const double s = a.number("eval-interval", 2.0);
    if (!(s > 0) || s > 1e6)
        throw UsageError(fmt::format("--eval-interval: {} is not a number of seconds > 0",
                                     *a.value("eval-interval")));
    return s;
}

void check_algorithms(const std::vector<std::string>& algorithms,
                      const optim::TrainingConfig* config, const Dataset* train,
                      const std::shared_ptr<const topology::Schedule>& topology,
                      std::uint64_t model_size) {
    for (const auto& algo : algorithms) {
        proto::CostOnlyWorker probe(model_size > 0 ? model_size : 1);
        const auto options = config ? config->algorithm_options(algo) : std::nullopt;
        proto::make_protocol(algo, options ? &*options : nullptr,
                             proto::PeerContext{0, topology->n(), topology, &probe, 1});
        if (config)
            proto::check_outer_algorithm(config->outer, algo, options ? &*options : nullptr,
                                         config->doc.file);
        if (config && train) {
            const auto model = optim::build_model(*config, *train);
            const auto layout = optim::build_partitions(*config, *model);
            const auto rates = optim::build_multirate(*config, layout);
            proto::check_multirate_algorithm(rates, algo);
            if (config->outer)
                optim::check_outer_partitions(*config->outer, &layout, config->doc.file);
            // dpsgd refuses it too when built; here the line names the file and the path.
            const auto ready = options ? options->find("partition_ready") : std::nullopt;
            if (ready && ready->value().is_boolean() && ready->as_bool() && rates.active())
                ready->fail(
                    "partition_ready does not follow the multirate partitions' own round "
                    "counters",
                    "drop partition_ready or the multirate section");
        }
    }
}

void check_elastic(const std::vector<std::string>& algorithms, const optim::TrainingConfig& config,
                   const std::string& config_path,
                   const std::shared_ptr<const topology::Schedule>& topology,
                   const std::string& cluster_path) {
    std::string elastic_list;
    for (const auto& name : proto::elastic_algorithms(false, false))
        elastic_list += (elastic_list.empty() ? "" : ",") + name;
    const std::string fix = fmt::format(
        "launch {} (--algorithms {}), or drop the cluster's join_at, leave_at and rejoin_at "
        "(docs/operations/elastic.md)",
        proto::join_names(proto::elastic_algorithms(true, true), "or", true), elastic_list);
    for (const auto& algo : algorithms) {
        if (algo == "ddp")
            throw ConfigError(cluster_path, "peers",
                              "ddp (torch DDP, bench/ddp_ref.py) cannot join, leave or rejoin a "
                              "running job",
                              fix);
        if (algo == "diloco")
            throw ConfigError(cluster_path, "peers",
                              "diloco (torch DiLoCo, bench/diloco_ref.py) cannot join, leave or "
                              "rejoin a running job",
                              fix);
        if (const auto why = proto::elastic_refusal(algo); !why.empty())
            throw ConfigError(cluster_path, "peers", why, fix);
        // With the config's multirate partitions (the entry's check_churn; the options are
        // the built protocol's to refuse, below).
        const auto options = config.algorithm_options(algo);
        proto::JobSetup setup;
        setup.topology = topology.get();
        setup.multirate = json::Node(config.doc).has("multirate");
        setup.config_file = config_path;
        setup.cluster = cluster_path;
        proto::check_churn(algo, setup);
        proto::CostOnlyWorker probe(1);
        const auto p =
            proto::make_protocol(algo, options ? &*options : nullptr,
                                 proto::PeerContext{0, topology->n(), topology, &probe, 1});
        if (const auto why = p->elastic_refusal(); !why.empty())
            throw ConfigError(config_path, fmt::format("algorithms.{}", algo),
                              fmt::format("the cluster {} has churn, and {}", cluster_path, why),
                              "or drop the cluster's join_at, leave_at and rejoin_at");
    }
}

}  // namespace gossamer::cli
