#pragma once
/// The part of `gossamer topo` in a file of its own (topo_command.cpp dispatches).

#include <string>
#include <vector>

namespace gossamer::cli {

/// gossamer topo gen (topo_gen_command.cpp).
int topo_gen(const std::vector<std::string>& args);

}  // namespace gossamer::cli
