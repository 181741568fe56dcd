#include "report_edges.hpp"

#include <cmath>
#include <limits>

namespace gossamer::launch {
namespace {

void put(std::vector<std::vector<double>>& m, std::size_t n, std::size_t from, std::size_t to,
         double v) {
    if (m.empty()) m.assign(n, std::vector<double>(n, std::nan("")));
    m[from][to] = v;
}

bool number(const json::Json& e, const char* key) {
    return e.contains(key) && e[key].is_number();
}

}  // namespace

void add_edge_metrics(int self, const json::Json& edges, std::size_t n, EdgeMaps& maps) {
    if (!edges.is_array() || self < 0 || static_cast<std::size_t>(self) >= n || n > 4096) return;
    const auto me = static_cast<std::size_t>(self);
    for (const auto& e : edges) {
        if (!e.is_object() || !number(e, "peer")) continue;
        const auto peer = e["peer"].get<long long>();
        if (peer < 0 || static_cast<std::size_t>(peer) >= n) continue;
        const auto j = static_cast<std::size_t>(peer);
        // Only what this peer heard on the edge: async lists out-only neighbours too, and a
        // neighbour that never reached a mix or sent a share has no staleness.
        const bool heard =
            e.value("in", true) && e.value("shares", 1) > 0 && e.value("mixes", 1) > 0;
        if (heard && number(e, "staleness_mean"))
            put(maps.staleness, n, j, me, e["staleness_mean"].get<double>());
        else if (heard && number(e, "staleness"))
            put(maps.staleness, n, j, me, e["staleness"].get<double>());
        if (number(e, "last_fraction")) {
            if (e.value("out", true) && e.value("pushes", 1) > 0)
                put(maps.weight, n, me, j, e["last_fraction"].get<double>());
        } else if (heard && number(e, "weight")) {
            put(maps.weight, n, j, me, e["weight"].get<double>());
        }
    }
}

}  // namespace gossamer::launch
