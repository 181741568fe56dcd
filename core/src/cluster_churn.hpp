#pragma once
// The churn fields of the cluster file (join_at, leave_at, rejoin_at with fail_at) checked
// together per rank (docs/operations/elastic.md, "The cluster file"). Private to core/src.

#include <functional>
#include <string_view>
#include <vector>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/json.hpp"

namespace gossamer {

/// The node that set `field` of rank `rank` (only asked for fields the rank has set).
using FieldNode = std::function<json::Node(int rank, std::string_view field)>;

/// Throws ConfigError (through the node of the field at fault) for an order other than
/// join_at < fail_at < rejoin_at < leave_at, a rejoin_at without fail_at, a leave_at after a
/// failure with no rejoin, or a job in which every peer joins after t = 0.
void check_churn(const std::vector<PeerSpec>& peers, const FieldNode& at);

}  // namespace gossamer
