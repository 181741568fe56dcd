// make_protocol: the protocols by name.
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/optimizers/protocols/gadmm/gadmm.hpp"
#include "gossamer/optimizers/protocols/lsgd/lsgd.hpp"
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"

namespace gossamer::proto {

std::vector<std::string> protocol_names() {
    return {"allreduce", "dpsgd", "sgp", "async", "choco", "lsgd", "gadmm", "qallreduce"};
}

std::unique_ptr<Protocol> make_protocol(std::string_view name, const json::Node* options,
                                        PeerContext ctx) {
    if (name == "allreduce") return make_allreduce(options, std::move(ctx));
    if (name == "choco") return make_choco(options, std::move(ctx));
    if (name == "dpsgd") return make_dpsgd(options, std::move(ctx));
    if (name == "sgp") return make_sgp(options, std::move(ctx));
    if (name == "async") return make_async(options, std::move(ctx));
    if (name == "lsgd") return make_lsgd(options, std::move(ctx));
    if (name == "gadmm") return make_gadmm(options, std::move(ctx));
    if (name == "qallreduce") return make_qallreduce(options, std::move(ctx));
    std::string all;
    for (const auto& n : protocol_names()) all += (all.empty() ? "" : ", ") + n;
    throw ConfigError("", "algorithm", fmt::format("unknown algorithm \"{}\"", name),
                      "use one of " + all);
}

}  // namespace gossamer::proto
