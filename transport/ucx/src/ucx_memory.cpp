// Which memory types UCX moves, from UCP itself (ucp_context_query), and the device transfer
// path that follows (docs/operations/gpu.md, "Which transfer path runs").
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "ucx_impl.hpp"

namespace gossamer::transport {
namespace ucx_detail {

UcxMemoryTypes memory_types_of(ucp_context_h context) {
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (auto s = ucp_context_query(context, &attr); s != UCS_OK)
        throw TransportError("ucx: ucp_context_query cannot report the memory types: " + ucs(s));
    UcxMemoryTypes t;
    auto has = [&](ucs_memory_type_t m) { return (attr.memory_types & UCS_BIT(m)) != 0; };
    t.host = has(UCS_MEMORY_TYPE_HOST);
    t.cuda = has(UCS_MEMORY_TYPE_CUDA);
    t.cuda_managed = has(UCS_MEMORY_TYPE_CUDA_MANAGED);
    t.rocm = has(UCS_MEMORY_TYPE_ROCM);
    t.rocm_managed = has(UCS_MEMORY_TYPE_ROCM_MANAGED);
    for (int m = UCS_MEMORY_TYPE_HOST; m < UCS_MEMORY_TYPE_LAST; ++m) {
        if (!has(static_cast<ucs_memory_type_t>(m))) continue;
        if (!t.names.empty()) t.names += ", ";
        t.names += ucs_memory_type_names[m];
    }
    if (t.names.empty()) t.names = "none";
    return t;
}

UcxMemoryTypes Ucx::memory_types() const {
    return memory_types_of(context_);
}

}  // namespace ucx_detail

UcxMemoryTypes query_ucx_memory_types() {
    ucp_config_t* config = nullptr;
    if (auto s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
        throw TransportError(
            fmt::format("ucx: cannot read the UCX configuration (check the UCX_* environment): {}",
                        ucx_detail::ucs(s)));
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;  // what UcxTransport asks for
    ucp_context_h context = nullptr;
    const auto s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (s != UCS_OK)
        throw TransportError(fmt::format(
            "ucx: ucp_init failed, cannot ask UCX for its memory types: {} (ucx_info -d lists "
            "what UCX finds; check UCX_TLS)",
            ucx_detail::ucs(s)));
    try {
        auto types = ucx_detail::memory_types_of(context);
        ucp_cleanup(context);
        return types;
    } catch (...) {
        ucp_cleanup(context);
        throw;
    }
}

const char* device_transfer_path(const UcxMemoryTypes& types) noexcept {
    return types.cuda ? "ucx-cuda" : "staging";
}

std::string ucx_version() {
    return ucp_get_version_string();
}

}  // namespace gossamer::transport
