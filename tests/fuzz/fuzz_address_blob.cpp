// The UCX address blob (transport/ucx/src/blob.hpp): a frame around a worker address that is
// refused with a reason unless it is whole, uncorrupted and this job's rank 3's; an accepted
// blob frames back to the same bytes.
#include <cstring>

#include "blob.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer::transport;
    gossamer::fuzz::Input in(data, size);
    const auto blob = in.rest_bytes();
    auto u = ucx_blob::unframe(blob, 0x2a, 3);
    gossamer::fuzz::check(u.ok == u.error.empty(), "a refused blob says why, an accepted one not");
    if (!u.ok) return 0;
    auto again = ucx_blob::frame(0x2a, 3, u.address);
    gossamer::fuzz::check(
        again.size() == blob.size() && std::memcmp(again.data(), blob.data(), blob.size()) == 0,
        "an accepted blob frames back to the same bytes");
    return 0;
}
