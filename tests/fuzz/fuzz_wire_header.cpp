// The wire header every payload comes behind (transport/wire.hpp, docs/modules/transport.md): a
// header is admitted or dropped with a reason; an admitted one decodes to fields that encode back
// to the very same bytes.
//
// Input: one byte of flags (bit 0: the receiver knows the sender, rank 0; bit 1: it knows the
// payload bytes that arrived, the input's length past the header), the header, payload bytes.
#include <algorithm>
#include <array>
#include <cstring>

#include "fuzz_support.hpp"
#include "gossamer/transport/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    using namespace gossamer::transport;
    fuzz::Input in(data, size);
    const auto flags = in.u8();
    const auto rest = in.rest_bytes();
    const auto header = rest.first(std::min<std::size_t>(rest.size(), kHeaderBytes));
    const auto arrived = static_cast<std::int64_t>(rest.size() - header.size());

    HeaderExpectation expect;
    expect.job_id = 0x2a;
    expect.receiver = 1;
    expect.sender = (flags & 1) ? 0 : -1;
    expect.size = 4;
    expect.max_payload = 1 << 20;
    Message m;
    const auto check = decode_header(header, expect, (flags & 2) ? arrived : -1, m);
    (void)to_string(check.reason);
    (void)announced_payload_bytes(header);
    if (!check.ok) return 0;
    fuzz::check(m.sender >= 0 && m.sender < expect.size && m.sender != expect.receiver,
                "an admitted header names another rank of the job");
    fuzz::check(m.elements * sizeof(float) <= expect.max_payload,
                "an admitted header stays within the payload limit");
    std::array<std::byte, kHeaderBytes> again{};
    encode_header(m, expect.job_id, again);
    fuzz::check(std::memcmp(again.data(), header.data(), kHeaderBytes) == 0,
                "an admitted header encodes back to the same bytes");
    return 0;
}
