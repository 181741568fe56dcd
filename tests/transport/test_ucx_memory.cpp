// Which memory types UCP reports (ucp_context_query), and the device transfer path that follows.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "backends.hpp"
#include "gossamer/core/error.hpp"
#include "support/optional.hpp"

using namespace transport_test;

namespace {

// `ucx_info -d` (at most 10 s); nullopt when it cannot run here.
std::optional<std::string> ucx_info_d() {
    FILE* pipe = popen("timeout 10 ucx_info -d 2>/dev/null", "r");
    if (!pipe) return std::nullopt;
    std::string out;
    char buf[4096];
    for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, got);
    const int rc = pclose(pipe);
    if (rc != 0 || out.empty()) return std::nullopt;
    return out;
}

// Sets an environment variable for one scope (UCP reads UCX_* when a context is created).
struct ScopedEnv {
    std::string name;
    std::optional<std::string> old;
    ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) old = v;
        setenv(name.c_str(), value, 1);
    }
    ~ScopedEnv() {
        if (old)
            setenv(name.c_str(), old->c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

bool contains(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("ucx memory types: UCP reports host memory and names what it reports") {
    const auto t = tr::query_ucx_memory_types();
    MESSAGE("UCX " << tr::ucx_version() << ", memory types: " << t.names);
    CHECK(t.host);
    CHECK(contains(t.names, "host"));
    CHECK(t.cuda == contains(t.names, "cuda"));
    CHECK(t.rocm == contains(t.names, "rocm"));
    CHECK_FALSE(tr::ucx_version().empty());
}

TEST_CASE("ucx memory types: no CUDA memory where ucx_info -d lists no CUDA component") {
    // Debian's libucx0 is built without CUDA: ucx_info -d names no cuda_copy, cuda_ipc or
    // gdr_copy, and UCP must then not claim CUDA memory (nor a path that sends device pointers).
    using gossamer::test::have_component;
    if (!have_component("ucx-utils", gossamer::test::missing_program(
                                         "ucx_info", "scripts/deps.sh --bench installs ucx-utils")))
        return;
    const auto info = ucx_info_d();
    REQUIRE_MESSAGE(info, "ucx_info -d is on PATH but failed or printed nothing");
    const auto t = tr::query_ucx_memory_types();
    if (!contains(*info, "cuda")) {
        CHECK_FALSE(t.cuda);
        CHECK_FALSE(t.cuda_managed);
        CHECK(std::string(tr::device_transfer_path(t)) == "staging");
    } else {
        MESSAGE("this UCX has CUDA components; UCP reports: " << t.names);
    }
}

TEST_CASE("ucx memory types: a transport's context reports what a throwaway context reports") {
    tr::UcxOptions o;
    static_cast<tr::TransportOptions&>(o) = options(0, 1);
    auto ucx = tr::make_ucx_transport(o);
    const auto mine = ucx->memory_types();
    const auto fresh = tr::query_ucx_memory_types();
    CHECK(mine.names == fresh.names);
    CHECK(mine.cuda == fresh.cuda);
}

TEST_CASE("ucx memory types: device pointers go to UCX only when UCP reports CUDA memory") {
    tr::UcxMemoryTypes host_only;
    host_only.host = true;
    CHECK(std::string(tr::device_transfer_path(host_only)) == "staging");
    tr::UcxMemoryTypes with_cuda = host_only;
    with_cuda.cuda = true;
    CHECK(std::string(tr::device_transfer_path(with_cuda)) == "ucx-cuda");
    tr::UcxMemoryTypes managed_only = host_only;  // managed memory alone is not device memory
    managed_only.cuda_managed = true;
    CHECK(std::string(tr::device_transfer_path(managed_only)) == "staging");
    tr::UcxMemoryTypes rocm = host_only;
    rocm.rocm = true;
    CHECK(std::string(tr::device_transfer_path(rocm)) == "staging");
}

TEST_CASE("ucx memory types: a UCX configuration UCP cannot start with is one error line") {
    const ScopedEnv bad("UCX_RNDV_THRESH", "not-a-size");
    std::string what;
    try {
        tr::query_ucx_memory_types();
    } catch (const gossamer::TransportError& e) {
        what = e.what();
    }
    CHECK(contains(what, "ucx: "));
    CHECK(contains(what, "cannot read the UCX configuration"));
    CHECK_FALSE(contains(what, "\n"));
}
