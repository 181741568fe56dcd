#pragma once
/// The registry: every algorithm by name.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {

/// "" when the registry's algorithm `name` can join and leave a running job (async); else one
/// line saying it cannot and what to use (checked before a simulation of a churning cluster).
std::string elastic_refusal(std::string_view name);

/// Builds protocol `name` ("allreduce", "dpsgd", "sgp", ...) with its options (a JSON object,
/// or nullptr for the defaults). Throws ConfigError naming the option's path.
std::unique_ptr<Protocol> make_protocol(std::string_view name, const json::Node* options,
                                        PeerContext ctx);
/// The names make_protocol knows.
std::vector<std::string> protocol_names();

}  // namespace gossamer::proto
