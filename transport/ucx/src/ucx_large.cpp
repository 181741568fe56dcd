// Eager or rendezvous for large payloads (ucx.hpp, docs/modules/transport.md "Eager and
// rendezvous").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "ucx_impl.hpp"

namespace gossamer::transport {
namespace {

// Transports without remote memory access (a rendezvous over them is copied like an eager
// message) and, among them, those that share memory between processes of one host.
constexpr std::array kNoRdma{"self", "tcp", "sysv", "posix", "cma", "knem", "xpmem"};
constexpr std::array kSharedMemory{"sysv", "posix", "cma", "knem", "xpmem"};

bool in(std::string_view name, const auto& list) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

std::vector<std::string> ucx_resource_names(std::string_view context_info) {
    // "#      resource 1  :  md 1  dev 1  flags -- tcp/lo"
    std::vector<std::string> names;
    std::istringstream ss{std::string(context_info)};
    std::string line;
    while (std::getline(ss, line)) {
        if (line.find("resource") == std::string::npos) continue;
        const auto dashes = line.find("-- ");
        if (dashes == std::string::npos) continue;
        const auto start = dashes + 3;
        const auto slash = line.find('/', start);
        if (slash == std::string::npos || slash == start) continue;
        std::string name = line.substr(start, slash - start);
        if (std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(std::move(name));
    }
    return names;
}

LargeMessages resolve_large_messages(LargeMessages asked, const std::vector<std::string>& names,
                                     bool shared_memory) {
    if (asked != LargeMessages::automatic) return asked;
    for (const auto& n : names)
        if (!in(n, kNoRdma)) return LargeMessages::rendezvous;
    if (shared_memory)
        for (const auto& n : names)
            if (in(n, kSharedMemory)) return LargeMessages::rendezvous;
    return LargeMessages::eager;
}

std::optional<LargeMessages> parse_large_messages(std::string_view text) {
    if (text == "automatic" || text == "auto") return LargeMessages::automatic;
    if (text == "rendezvous") return LargeMessages::rendezvous;
    if (text == "eager") return LargeMessages::eager;
    return std::nullopt;
}

const char* to_string(LargeMessages m) noexcept {
    switch (m) {
        case LargeMessages::automatic:
            return "automatic";
        case LargeMessages::rendezvous:
            return "rendezvous";
        case LargeMessages::eager:
            return "eager";
    }
    return "?";
}

namespace ucx_detail {

LargeMessages asked_large(const UcxOptions& o) {
    const char* env = std::getenv("GOSSAMER_UCX_LARGE");
    if (!env || !*env) return o.large;
    const auto parsed = parse_large_messages(env);
    if (!parsed)
        throw TransportError(
            fmt::format("ucx: rank {}: GOSSAMER_UCX_LARGE={}: not a way to send large messages; "
                        "use automatic, rendezvous or eager",
                        o.rank, env));
    return *parsed;
}

LargeMessages resolve_large(const UcxOptions& o, LargeMessages asked, ucp_context_h context) {
    if (asked != LargeMessages::automatic) return asked;
    char* text = nullptr;
    std::size_t size = 0;
    std::FILE* f = ::open_memstream(&text, &size);
    if (!f) return LargeMessages::rendezvous;  // UCX's own choice: never wrong, only slower
    ucp_context_print_info(context, f);
    std::fclose(f);
    const auto names = ucx_resource_names(std::string_view(text, size));
    std::free(text);
    const int local = o.local_peers > 0 ? o.local_peers : o.size;
    const bool shared = o.errors == ErrorHandling::none && local >= o.size;
    const auto resolved = resolve_large_messages(asked, names, shared);
    log::debug("transport ucx: rank {}: large messages go {} (transports: {})", o.rank,
               to_string(resolved), fmt::join(names, ", "));
    return resolved;
}

}  // namespace ucx_detail
}  // namespace gossamer::transport
