// Writes the binary seed corpora of tests/fuzz/corpus with the project's own encoders (the
// JSON loaders' seeds are the files of examples/): `fuzz_make_seeds tests/fuzz/corpus`. Run it
// again when a format changes; the inputs it writes are committed.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "blob.hpp"
#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/transport/wire.hpp"
#include "wire.hpp"

namespace fs = std::filesystem;
using namespace gossamer;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const std::vector<std::uint8_t>& b) {
    fs::create_directories(root / target);
    std::ofstream(root / target / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
template <typename B>
std::vector<std::uint8_t> bytes(const B& b) {
    auto p = reinterpret_cast<const std::uint8_t*>(b.data());
    return {p, p + b.size() * sizeof(b[0])};
}
void le(std::vector<std::uint8_t>& out, std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void model_files() {
    const auto tmp = root / "model_file" / "tmp.bin";
    fs::create_directories(tmp.parent_path());
    std::vector<float> p(40);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.25f * static_cast<float>(i) - 3;
    PartitionLayout two({{"layer0", 0, 30}, {"layer1", 30, 10}}, 40);
    save_model_file(tmp.string(), "mlp 4-6-2 (seed)", 12, two, p);
    std::ifstream in(tmp, std::ios::binary);
    std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(in)), {});
    put("model_file", "two-partitions.bin", b);
    save_model_file(tmp.string(), "logreg", 0, PartitionLayout({{"all", 0, 1}}, 1),
                    std::span<const float>(p.data(), 1));
    std::ifstream in1(tmp, std::ios::binary);
    put("model_file", "one-value.bin", {(std::istreambuf_iterator<char>(in1)), {}});
    fs::remove(tmp);
}

// A real cut: 4 cost-only peers of each resumable protocol on a ring take snapshots every 40 of
// 100 steps over the in-process transport; rank 1's at step 40 seeds both checkpoint targets.
// (allreduce does not run cost-only over a driver, whose transport carries `elements` values:
// its state, three counters after the worker's steps, is written as allreduce_state.cpp does.)
void checkpoints() {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = 4;
    const auto ring = topology::generate(f);
    int index = 0;
    for (const char* name : {"dpsgd", "allreduce", "sgp", "async"}) {
        std::vector<std::unique_ptr<proto::CostOnlyWorker>> workers;
        std::vector<std::unique_ptr<proto::Protocol>> owned;
        std::vector<proto::Protocol*> protocols;
        std::vector<proto::LocalWorker*> locals;
        for (int r = 0; r < 4; ++r) {
            workers.push_back(std::make_unique<proto::CostOnlyWorker>(8));
            owned.push_back(proto::make_protocol(
                name, nullptr, proto::PeerContext{r, 4, ring, workers.back().get(), 100}));
            owned.back()->enable_checkpoints(40);
            protocols.push_back(owned.back().get());
            locals.push_back(workers.back().get());
        }
        std::vector<char> state;
        if (std::string_view(name) == "allreduce") {
            StateWriter w;
            w.tag("worker");
            w.i64(40);
            w.tag("allreduce");
            w.i64(40);
            w.i64(40);          // steps
            w.i64(40);          // all-reduces
            w.u64(40 * 2 * 3);  // messages sent to rank + 1: 2 (n - 1) per all-reduce
            state = w.bytes();
        } else {
            peer::run_inproc_peers(protocols, locals, [&state](int r) {
                peer::DriverOptions o;
                if (r == 1)
                    o.on_snapshot = [&state](proto::Snapshot&& s) {
                        if (s.step == 40) state = std::move(s.state);
                    };
                o.stall_timeout = peer::Millis(10'000);
                return o;
            });
        }
        std::vector<std::uint8_t> blob = {static_cast<std::uint8_t>(index++)};
        blob.insert(blob.end(), state.begin(), state.end());
        put("checkpoint_state", fmt::format("{}-rank1-step40.bin", name), blob);
        CheckpointHeader h;
        h.job_id = 7;
        h.algorithm = name;
        h.rank = 1;
        h.n = 4;
        h.step = 40;
        h.model = "cost-only (8 parameters)";
        h.layout = PartitionLayout({{"all", 0, 8}}, 8);
        const auto tmp = root / "checkpoint_file" / "tmp.state";
        fs::create_directories(tmp.parent_path());
        save_checkpoint_file(tmp.string(), h, state);
        std::ifstream in(tmp, std::ios::binary);
        put("checkpoint_file", fmt::format("{}-rank1-step40.state", name),
            {(std::istreambuf_iterator<char>(in)), {}});
        fs::remove(tmp);
    }
}

void wire_headers() {
    using namespace gossamer::transport;
    for (int kind = 1; kind <= 5; ++kind) {
        Message m;
        m.kind = static_cast<MessageKind>(kind);
        m.sender = 0;
        m.receiver = 1;
        m.edge_seq = 7;
        m.round = 3;
        m.elements = kind == 5 ? 0 : 4;
        m.weight = 0.5;
        m.sent_at = 1.25;
        std::array<std::byte, kHeaderBytes> h{};
        encode_header(m, 0x2a, h);
        // Flags 3: the sender and the payload bytes that arrived are known.
        std::vector<std::uint8_t> b(1 + kHeaderBytes + 4 * m.elements, 0x11);
        b[0] = 3;
        auto hb = bytes(h);
        std::copy(hb.begin(), hb.end(), b.begin() + 1);
        put("wire_header", fmt::format("kind{}.bin", kind), b);
    }
}

void codecs() {
    using namespace gossamer::optim;
    const std::vector<std::pair<CompressorKind, const char*>> kinds = {
        {CompressorKind::fp16, "codec_fp16"},
        {CompressorKind::int8, "codec_int8"},
        {CompressorKind::int4, "codec_int4"},
        {CompressorKind::topk, "codec_topk"},
        {CompressorKind::randomk, "codec_randomk"}};
    for (const auto& [kind, target] : kinds)
        for (std::size_t n : {1u, 16u, 100u}) {
            // int8: block 1 + 16383 % 1024; int4: 1 + 16383 % 195; fraction 1/4
            const std::uint16_t param = 16383;
            CompressorConfig c;
            c.kind = kind;
            c.block = 1 + param % (kind == CompressorKind::int4 ? kInt4MaxBlock : 1024);
            c.fraction = (1.0 + param) / 65536.0;
            c.seed = 5;
            CodecKey key{1, 2, 3};
            std::vector<float> x(n);
            for (std::size_t i = 0; i < n; ++i)
                x[i] = static_cast<float>(i % 7) - 2.5f + 0.001f * static_cast<float>(i);
            auto q = make_compressor(c);
            std::vector<std::byte> enc(q->encoded_bytes(n));
            q->encode(x, key, enc);
            std::vector<std::uint8_t> b;
            le(b, n, 2);
            le(b, param, 2);
            le(b, c.seed, 8);
            le(b, key.seed, 8);
            le(b, key.stream, 8);
            le(b, key.index, 8);
            auto eb = bytes(enc);
            b.insert(b.end(), eb.begin(), eb.end());
            put(target, fmt::format("n{}.bin", n), b);
        }
}

void bootstrap_frames() {
    namespace w = gossamer::bootstrap::wire;
    auto with = [](std::uint8_t which, std::uint8_t n, const w::Bytes& body) {
        std::vector<std::uint8_t> b(body.size() + 2);
        b[0] = which;
        b[1] = n;
        std::copy(body.begin(), body.end(), b.begin() + 2);
        return b;
    };
    w::Hello h;
    h.rank = 2;
    h.n = 4;
    h.job_id = 0x2a;
    h.model_size = 40;
    h.token = "secret-token";
    h.layout_text = "layer0 [0, 30), layer1 [30, 40)";
    h.address = gossamer::bootstrap::Blob(24, std::byte{7});
    h.settings = {{"algorithm", 11, "dpsgd", ""}, {"epochs", 12, "3", ""}};
    h.listen = {"127.0.0.1", 29502};
    auto hello = w::encode(h);
    put("bootstrap_frames", "hello.bin", with(1, 0, hello));
    put("bootstrap_frames", "header-hello.bin", with(0, 0, w::frame(w::Kind::hello, hello)));
    put("bootstrap_frames", "header-heartbeat.bin", with(0, 0, w::frame(w::Kind::heartbeat)));
    w::Notice notice{6, {1, 3}, "rank 1's job token does not match rank 0's"};
    put("bootstrap_frames", "notice.bin", with(2, 0, w::encode(notice)));
    std::vector<gossamer::bootstrap::Blob> blobs(3, gossamer::bootstrap::Blob(8, std::byte{1}));
    std::vector<gossamer::bootstrap::Endpoint> eps = {
        {"127.0.0.1", 29500}, {"127.0.0.1", 29501}, {"10.0.0.3", 29502}};
    put("bootstrap_frames", "table.bin", with(3, 3, w::encode_table(blobs, eps)));
}

void address_blobs() {
    std::vector<std::byte> address(40);
    for (std::size_t i = 0; i < address.size(); ++i) address[i] = static_cast<std::byte>(i * 13);
    put("address_blob", "rank3.bin", bytes(transport::ucx_blob::frame(0x2a, 3, address)));
    put("address_blob", "empty-address.bin", bytes(transport::ucx_blob::frame(0x2a, 3, {})));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s tests/fuzz/corpus\n", argv[0]);
        return 2;
    }
    root = argv[1];
    model_files();
    checkpoints();
    wire_headers();
    codecs();
    bootstrap_frames();
    address_blobs();
    std::printf("seeds written under %s\n", root.c_str());
    return 0;
}
