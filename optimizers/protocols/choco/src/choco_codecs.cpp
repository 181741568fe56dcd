// Choco: what it reports of its per-edge codecs (option "edge_codecs", protocol/edge_codec.hpp).
#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "gossamer/optimizers/protocols/choco/choco.hpp"

namespace gossamer::proto {

// choco's count of deltas by codec (choco.hpp) and its per-edge report of them.
std::vector<std::uint64_t> Choco::codecs_sent(int j) const {
    std::vector<std::uint64_t> sum;
    for (const Channel& ch : channels_)
        if (auto it = ch.out.find(j); it != ch.out.end()) {
            const auto& v = it->second.codecs;
            if (sum.size() < v.size()) sum.resize(v.size(), 0);
            for (std::size_t k = 0; k < v.size(); ++k) sum[k] += v[k];
        }
    return sum;
}

json::Json Choco::edge_metrics() const {
    if (!codecs_.on()) return nullptr;
    std::set<int> outs;
    for (const Channel& ch : channels_)
        for (const auto& [j, e] : ch.out) outs.insert(j);
    json::Json out = json::Json::array();
    for (int j : outs) {
        json::Json codecs = json::Json::object();
        const auto sent = codecs_sent(j);
        for (std::size_t k = 0; k < sent.size(); ++k) {
            if (sent[k] == 0) continue;
            const std::string name =
                k == kCodecChannel ? "channel"
                : k == kCodecRaw
                    ? "raw"
                    : fmt::format("{}:{}", k - 2,
                                  optim::to_string(codecs_.tiers()[k - 2].compressor.kind));
            codecs[name] = sent[k];
        }
        out.push_back({{"peer", j}, {"out", true}, {"codecs", codecs}});
    }
    return out;
}

}  // namespace gossamer::proto
