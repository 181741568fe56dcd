#pragma once
/// The algorithm checks `gossamer sim` and `gossamer launch` share: everything is validated
/// before anything runs or is written, so a bad name or option is one line and exit 2.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/optimizers/training_config.hpp"
#include "gossamer/topology/schedule.hpp"

namespace gossamer::cli {

/// A comma-separated list of algorithm names (`--algorithms`); UsageError naming an unknown
/// one and the known ones.
std::vector<std::string> parse_algorithms(const std::string& list);

/// Builds every algorithm's protocol for rank 0 with its options from `config` (when given) and,
/// with `train`, checks the config's multirate setup against it; throws ConfigError for a bad
/// option. `model_size` sizes the probe worker.
void check_algorithms(const std::vector<std::string>& algorithms,
                      const optim::TrainingConfig* config, const Dataset* train,
                      const std::shared_ptr<const topology::Schedule>& topology,
                      std::uint64_t model_size);

}  // namespace gossamer::cli
