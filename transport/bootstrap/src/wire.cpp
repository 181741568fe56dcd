#include "wire.hpp"

#include <algorithm>
#include <cstring>

#include "gossamer/core/digest.hpp"

namespace gossamer::bootstrap::wire {
namespace {

class Writer {
  public:
    void u8(std::uint8_t v) { out_.push_back(v); }
    void u16(std::uint16_t v) { put(v, 2); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void bytes(const void* data, std::size_t size) {
        auto p = static_cast<const std::uint8_t*>(data);
        out_.insert(out_.end(), p, p + size);
    }
    void text(const std::string& s) {
        u32(static_cast<std::uint32_t>(s.size()));
        bytes(s.data(), s.size());
    }
    void blob(const Blob& b) {
        u32(static_cast<std::uint32_t>(b.size()));
        bytes(b.data(), b.size());
    }
    Bytes take() { return std::move(out_); }

  private:
    void put(std::uint64_t v, int width) {
        for (int i = 0; i < width; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    }
    Bytes out_;
};

class Reader {
  public:
    explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
    std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
    std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::string text(std::uint32_t limit, const char* what) {
        auto size = length(limit, what);
        std::string s(reinterpret_cast<const char*>(in_.data() + pos_), size);
        pos_ += size;
        return s;
    }
    Blob blob(std::uint32_t limit, const char* what) {
        auto size = length(limit, what);
        auto first = reinterpret_cast<const std::byte*>(in_.data() + pos_);
        pos_ += size;
        return Blob(first, first + size);
    }
    void finish() const {
        if (pos_ != in_.size())
            throw Malformed(std::to_string(in_.size() - pos_) + " unexpected bytes after the body");
    }

  private:
    std::uint32_t length(std::uint32_t limit, const char* what) {
        std::uint32_t size = u32();
        if (size > limit)
            throw Malformed(std::string(what) + " of " + std::to_string(size) +
                            " bytes exceeds the limit of " + std::to_string(limit));
        need(size);
        return size;
    }
    void need(std::size_t size) const {
        if (in_.size() - pos_ < size) throw Malformed("the body ends early");
    }
    std::uint64_t get(int width) {
        need(static_cast<std::size_t>(width));
        std::uint64_t v = 0;
        for (int i = 0; i < width; ++i) v |= std::uint64_t{in_[pos_ + i]} << (8 * i);
        pos_ += static_cast<std::size_t>(width);
        return v;
    }
    std::span<const std::uint8_t> in_;
    std::size_t pos_ = 0;
};

Endpoint endpoint(Reader& r) {
    Endpoint e;
    e.host = r.text(kMaxHost, "a host name");
    const std::uint32_t port = r.u32();
    if (port > 65535) throw Malformed("port " + std::to_string(port) + " is out of range");
    e.port = static_cast<int>(port);
    return e;
}

}  // namespace

Header decode_header(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < kHeaderBytes) throw Malformed("the header ends early");
    if (!std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
        throw Malformed("not a Gossamer bootstrap frame (bad magic)");
    Reader r(bytes.subspan(4, kHeaderBytes - 4));
    Header h;
    h.version = r.u16();
    auto kind = r.u8();
    r.u8();  // reserved
    h.length = r.u32();
    if (kind < static_cast<std::uint8_t>(Kind::hello) ||
        kind > static_cast<std::uint8_t>(kLastKind))
        throw Malformed("unknown frame kind " + std::to_string(kind));
    h.kind = static_cast<Kind>(kind);
    if (h.length > kMaxBody)
        throw Malformed("a body of " + std::to_string(h.length) + " bytes exceeds the limit");
    return h;
}

Bytes frame(Kind kind, std::span<const std::uint8_t> body) {
    Writer w;
    w.bytes(kMagic, sizeof kMagic);
    w.u16(kVersion);
    w.u8(static_cast<std::uint8_t>(kind));
    w.u8(0);
    w.u32(static_cast<std::uint32_t>(body.size()));
    w.bytes(body.data(), body.size());
    return w.take();
}

Bytes encode(const Hello& h) {
    Writer w;
    w.u32(h.rank);
    w.u32(h.n);
    w.u64(h.job_id);
    w.u64(h.peers_fingerprint);
    w.u64(h.model_size);
    w.u64(h.layout_fingerprint);
    w.text(h.token);
    w.text(h.layout_text);
    w.blob(h.address);
    w.u32(static_cast<std::uint32_t>(h.settings.size()));
    for (const auto& s : h.settings) {
        w.text(s.field);
        w.u64(s.digest);
        w.text(s.value);
    }
    w.text(h.listen.host);
    w.u32(static_cast<std::uint32_t>(h.listen.port));
    return w.take();
}

Hello decode_hello(std::span<const std::uint8_t> body) {
    Reader r(body);
    Hello h;
    h.rank = r.u32();
    h.n = r.u32();
    h.job_id = r.u64();
    h.peers_fingerprint = r.u64();
    h.model_size = r.u64();
    h.layout_fingerprint = r.u64();
    h.token = r.text(kMaxToken, "a job token");
    h.layout_text = r.text(kMaxText, "a layout description");
    h.address = r.blob(kMaxBlob, "an address blob");
    const std::uint32_t count = r.u32();
    if (count > kMaxSettings)
        throw Malformed(std::to_string(count) + " settings exceed the limit of " +
                        std::to_string(kMaxSettings));
    for (std::uint32_t i = 0; i < count; ++i) {
        Setting s;
        s.field = r.text(kMaxField, "a setting's name");
        s.digest = r.u64();
        s.value = r.text(kMaxValue, "a setting's description");
        h.settings.push_back(std::move(s));
    }
    h.listen = endpoint(r);
    r.finish();
    return h;
}

Bytes encode(const Notice& notice) {
    Writer w;
    w.u32(notice.code);
    w.u32(static_cast<std::uint32_t>(notice.ranks.size()));
    for (auto r : notice.ranks) w.u32(r);
    w.text(notice.text);
    return w.take();
}

Notice decode_notice(std::span<const std::uint8_t> body) {
    Reader r(body);
    Notice notice;
    notice.code = r.u32();
    std::uint32_t count = r.u32();
    if (count > kMaxText) throw Malformed("a notice about " + std::to_string(count) + " ranks");
    for (std::uint32_t i = 0; i < count; ++i) notice.ranks.push_back(r.u32());
    notice.text = r.text(kMaxText, "a notice");
    r.finish();
    return notice;
}

Bytes encode(const ClockReading& reading) {
    Writer w;
    w.u32(reading.seq);
    w.u64(static_cast<std::uint64_t>(reading.unix_us));
    return w.take();
}

ClockReading decode_clock(std::span<const std::uint8_t> body) {
    Reader r(body);
    ClockReading c;
    c.seq = r.u32();
    c.unix_us = static_cast<std::int64_t>(r.u64());
    r.finish();
    return c;
}

Bytes encode_table(const std::vector<Blob>& blobs, const std::vector<Endpoint>& endpoints) {
    Writer w;
    w.u32(static_cast<std::uint32_t>(blobs.size()));
    for (const auto& b : blobs) w.blob(b);
    for (std::size_t i = 0; i < blobs.size(); ++i) {
        const Endpoint e = i < endpoints.size() ? endpoints[i] : Endpoint{};
        w.text(e.host);
        w.u32(static_cast<std::uint32_t>(e.port));
    }
    return w.take();
}

Table decode_full_table(std::span<const std::uint8_t> body, std::uint32_t n) {
    Reader r(body);
    std::uint32_t count = r.u32();
    if (count != n)
        throw Malformed("a table of " + std::to_string(count) + " peers, expected " +
                        std::to_string(n));
    Table t;
    for (std::uint32_t i = 0; i < count; ++i)
        t.blobs.push_back(r.blob(kMaxBlob, "an address blob"));
    for (std::uint32_t i = 0; i < count; ++i) t.endpoints.push_back(endpoint(r));
    r.finish();
    return t;
}

std::vector<Blob> decode_table(std::span<const std::uint8_t> body, std::uint32_t n) {
    return decode_full_table(body, n).blobs;
}

std::uint64_t count_only_fingerprint(std::size_t n) {
    const std::string tag = "count-only " + std::to_string(n);
    return Digest().bytes(tag.data(), tag.size()).value();
}

bool count_only(const std::vector<Endpoint>& peers) {
    return std::any_of(peers.begin(), peers.end(), [](const Endpoint& e) { return e.port == 0; });
}

std::uint64_t peers_fingerprint(const std::vector<Endpoint>& peers) {
    Digest d;
    if (count_only(peers)) return count_only_fingerprint(peers.size());
    for (const auto& p : peers) {
        const unsigned char end = 0;
        unsigned char port[4];
        for (int i = 0; i < 4; ++i) port[i] = static_cast<unsigned char>(p.port >> (8 * i));
        d.bytes(p.host.data(), p.host.size()).bytes(&end, 1).bytes(port, sizeof port);
    }
    return d.value();
}

}  // namespace gossamer::bootstrap::wire
