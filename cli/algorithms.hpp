#pragma once
/// The option checks `gossamer sim`, `launch` and `peer` share: everything is validated before
/// anything runs or is written, so a bad name or option is one line and exit 2.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "gossamer/core/dataset.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::cli {

/// A comma-separated list of algorithm names (`--algorithms`); UsageError naming an unknown
/// one and the known ones. `extra`: names known besides the protocols (launch's `ddp`, `diloco`).
std::vector<std::string> parse_algorithms(const std::string& list,
                                          const std::vector<std::string>& extra = {});

/// The registered algorithms, "allreduce, dpsgd, ..." in registry order (for --help).
std::string algorithm_names();
/// For the end of a command's --help summary: a line per registered algorithm with its summary.
std::string algorithms_help();
/// The registry's default --algorithms of gossamer sim and of gossamer launch ("a,b,c").
std::string default_sim_algorithms();
std::string default_launch_algorithms();

/// --eval-interval S of gossamer peer and launch: seconds > 0 (default 2); else UsageError.
double eval_interval_option(const ParsedArgs& a);

/// Builds every algorithm's protocol for rank 0 with its options from `config` (when given) and,
/// with `train`, checks the config's multirate setup against it; throws ConfigError for a bad
/// option. `model_size` sizes the probe worker.
void check_algorithms(const std::vector<std::string>& algorithms,
                      const optim::TrainingConfig* config, const Dataset* train,
                      const std::shared_ptr<const topology::Schedule>& topology,
                      std::uint64_t model_size);

/// Before a launch whose cluster file has churn (join_at, leave_at, rejoin_at): every algorithm
/// must be able to join and leave a running job with its options (async, dpsgd without delay,
/// reweight, partition_ready or multirate, allreduce with "elastic"; docs/operations/elastic.md).
/// Throws ConfigError naming the cluster file (the algorithm) or the training config (the option),
/// one line.
void check_elastic(const std::vector<std::string>& algorithms, const optim::TrainingConfig& config,
                   const std::string& config_path,
                   const std::shared_ptr<const topology::Schedule>& topology,
                   const std::string& cluster_path);

}  // namespace gossamer::cli
