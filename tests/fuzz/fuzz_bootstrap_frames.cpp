// The bootstrap's frames (transport/bootstrap/src/wire.hpp, docs/modules/bootstrap.md): the frame
// header, the handshake (hello), notices (refuse, abort, peer_gone, views) and the table of
// address blobs. Bytes decode or throw wire::Malformed; what decodes encodes back to the same
// bytes.
//
// Input: one byte choosing the decoder (0 header, 1 hello, 2 notice, 3 table), one byte of
// table size n, then the frame's bytes.
#include <algorithm>
#include <cstring>

#include "fuzz_support.hpp"
#include "wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer::bootstrap;
    gossamer::fuzz::Input in(data, size);
    const auto which = in.u8() % 4;
    const std::uint32_t n = in.u8();
    const auto body = in.rest();
    auto same = [&](const wire::Bytes& again) {
        return again.size() == body.size() &&
               (body.empty() || std::memcmp(again.data(), body.data(), body.size()) == 0);
    };
    try {
        switch (which) {
            case 0: {
                auto h = wire::decode_header(body);
                gossamer::fuzz::check(h.length <= wire::kMaxBody, "a header within the limit");
                auto again = wire::frame(h.kind);
                gossamer::fuzz::check(std::equal(again.begin(), again.begin() + 4, body.begin()),
                                      "a frame header starts with the magic");
                break;
            }
            case 1:
                gossamer::fuzz::check(same(wire::encode(wire::decode_hello(body))),
                                      "a hello encodes back to the same bytes");
                break;
            case 2:
                gossamer::fuzz::check(same(wire::encode(wire::decode_notice(body))),
                                      "a notice encodes back to the same bytes");
                break;
            default: {
                auto t = wire::decode_full_table(body, n);
                gossamer::fuzz::check(t.blobs.size() == n && t.endpoints.size() == n,
                                      "a table holds n blobs and n endpoints");
                gossamer::fuzz::check(same(wire::encode_table(t.blobs, t.endpoints)),
                                      "a table encodes back to the same bytes");
            }
        }
    } catch (const wire::Malformed&) {
    }
    return 0;
}
