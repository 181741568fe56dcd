#include "gossamer/core/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include "gossamer/core/error.hpp"

namespace gossamer::trace {
namespace {

constexpr const char* kSamplingRule =
    "whole steps: a peer's step k, the wait before it and what its messages track records "
    "between the end of step k-1 and the end of step k are kept when k % every == 0; failures "
    "and evaluations always";

// Chrome trace times are microseconds.
double us(double seconds) {
    return seconds * 1e6;
}

struct FileCloser {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

}  // namespace

Recorder::Recorder(std::string clock, std::size_t limit_bytes, double origin_unix_us)
    : clock_(std::move(clock)),
      origin_unix_us_(origin_unix_us),
      max_events_(std::max<std::size_t>(limit_bytes / kMaxEventBytes, 16)) {}

std::int64_t& Recorder::slot_of(int peer) {
    const auto i = static_cast<std::size_t>(peer);
    if (i >= slots_.size()) {
        slots_.resize(i + 1, 0);
        seen_.resize(i + 1, 0);
    }
    if (!seen_[i]) {
        seen_[i] = 1;
        ++peers_seen_;
    }
    return slots_[i];
}

void Recorder::add(const Event& e) {
    if (e.slot >= 0 && e.slot % every_ != 0) return;
    events_.push_back(e);
    if (events_.size() >= max_events_) compact();
}

// Doubles `every` until the kept events fit in half the budget, so that compacting stays rare
// (amortised O(1) per event).
void Recorder::compact() {
    while (events_.size() > max_events_ / 2) {
        every_ *= 2;
        std::erase_if(events_, [this](const Event& e) { return e.slot >= 0 && e.slot % every_; });
        if (every_ > (std::numeric_limits<std::int64_t>::max() >> 2)) break;
        // Only events that are always kept are left: nothing more to drop.
        if (std::all_of(events_.begin(), events_.end(), [](const Event& e) { return e.slot < 0; }))
            break;
    }
}

void Recorder::step(int peer, double start, double end, std::int64_t step, double loss) {
    std::int64_t& slot = slot_of(peer);
    Event e;
    e.type = Type::step;
    e.pid = peer;
    e.ts = start;
    e.dur = std::max(0.0, end - start);
    e.slot = slot++;
    e.round = step;
    e.value = loss;
    add(e);
}

void Recorder::round(int peer, double start, std::span<const double> inner_ends, std::int64_t round,
                     std::int64_t first_step, std::int64_t steps_per_round, double loss) {
    std::int64_t& slot = slot_of(peer);
    const double end = inner_ends.empty() ? start : inner_ends.back();
    Event e;
    e.type = Type::round;
    e.pid = peer;
    e.ts = start;
    e.dur = std::max(0.0, end - start);
    e.slot = slot;
    e.round = round;
    e.value = loss;
    e.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(steps_per_round, 0));
    e.other = static_cast<std::int32_t>(inner_ends.size());
    add(e);  // before its steps: a viewer nests the steps in the span that comes first
    double at = start;
    for (std::size_t j = 0; j < inner_ends.size(); ++j) {
        Event s;
        s.type = Type::inner_step;
        s.pid = peer;
        s.ts = at;
        s.dur = std::max(0.0, inner_ends[j] - at);
        s.slot = slot;
        s.round = first_step + static_cast<std::int64_t>(j);
        s.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(round, 0));
        add(s);
        at = inner_ends[j];
    }
    ++slot;
}

void Recorder::wait(int peer, double start, double end, WaitCause cause) {
    Event e;
    e.type = Type::wait;
    e.pid = peer;
    e.ts = start;
    e.dur = std::max(0.0, end - start);
    e.slot = slot_of(peer);
    e.kind = cause.kind;
    e.other = cause.peer;
    e.round = cause.round;
    add(e);
}

void Recorder::send(int peer, double t, int to, std::uint64_t bytes, std::int64_t round, int kind) {
    Event e;
    e.type = Type::send;
    e.pid = peer;
    e.ts = t;
    e.slot = slot_of(peer);
    e.other = to;
    e.bytes = bytes;
    e.round = round;
    e.kind = static_cast<std::uint8_t>(kind);
    add(e);
}

void Recorder::receive(int peer, double t, int from, std::uint64_t bytes, std::int64_t round,
                       int kind) {
    Event e;
    e.type = Type::receive;
    e.pid = peer;
    e.ts = t;
    e.slot = slot_of(peer);
    e.other = from;
    e.bytes = bytes;
    e.round = round;
    e.kind = static_cast<std::uint8_t>(kind);
    add(e);
}

void Recorder::failure(int peer, double t) {
    slot_of(peer);
    Event e;
    e.type = Type::failure;
    e.pid = peer;
    e.ts = t;
    add(e);
}

void Recorder::peer_failed(int peer, double t, int dead) {
    slot_of(peer);
    Event e;
    e.type = Type::peer_failed;
    e.pid = peer;
    e.ts = t;
    e.other = dead;
    add(e);
}

void Recorder::evaluation(int peer, double start, double end, double accuracy, double loss) {
    if (peer != kJobTrack) slot_of(peer);
    Event e;
    e.type = Type::evaluation;
    e.pid = peer;
    e.ts = start;
    e.dur = std::max(0.0, end - start);
    e.value = accuracy;
    e.value2 = loss;
    add(e);
}

void Recorder::write(const std::string& path) const {
    std::error_code ec;
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "w"));
    if (!f)
        throw ConfigError(path, "--trace",
                          fmt::format("cannot create the trace file: {}", std::strerror(errno)),
                          "choose a writable path");
    fmt::memory_buffer b;
    const auto flush = [&] {
        if (std::fwrite(b.data(), 1, b.size(), f.get()) != b.size())
            throw ConfigError(path, "--trace",
                              fmt::format("cannot write the trace: {}", std::strerror(errno)),
                              "free space or choose another path");
        b.clear();
    };
    const auto kind_name = [this](std::uint8_t k) {
        return k < kinds_.size() ? kinds_[k] : fmt::format("kind {}", k);
    };
    fmt::format_to(std::back_inserter(b), "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    bool job_track = false;
    for (const auto& e : events_) job_track = job_track || e.pid == kJobTrack;
    // Metadata: one process per peer (sorted by rank), two threads each.
    bool first = true;
    const auto sep = [&] {
        if (!first) fmt::format_to(std::back_inserter(b), ",\n");
        first = false;
    };
    for (int p = 0; p < static_cast<int>(seen_.size()); ++p) {
        if (!seen_[static_cast<std::size_t>(p)]) continue;
        sep();
        fmt::format_to(std::back_inserter(b),
                       "{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_name\",\"args\":{{\"name\":"
                       "\"peer {0}\"}}}},\n{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_sort_"
                       "index\",\"args\":{{\"sort_index\":{0}}}}},\n{{\"ph\":\"M\",\"pid\":{0},"
                       "\"tid\":0,\"name\":\"thread_name\",\"args\":{{\"name\":\"compute\"}}}},\n{{"
                       "\"ph\":\"M\",\"pid\":{0},\"tid\":1,\"name\":\"thread_name\",\"args\":{{"
                       "\"name\":\"messages\"}}}},\n{{\"ph\":\"M\",\"pid\":{0},\"tid\":2,"
                       "\"name\":\"thread_name\",\"args\":{{\"name\":\"evaluation\"}}}}",
                       p);
    }
    if (job_track) {
        sep();
        fmt::format_to(std::back_inserter(b),
                       "{{\"ph\":\"M\",\"pid\":{},\"name\":\"process_name\",\"args\":{{\"name\":"
                       "\"job\"}}}}",
                       kJobTrack);
    }
    for (const auto& e : events_) {
        sep();
        const double ts = us(e.ts), dur = us(e.dur);
        switch (e.type) {
            case Type::step:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":{},"
                               "\"tid\":0,\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"step\":{},"
                               "\"loss\":{:.6g}}}}}",
                               e.pid, ts, dur, e.round, e.value);
                break;
            case Type::round:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"X\",\"cat\":\"round\",\"name\":\"round {}\",\"pid\":{},"
                               "\"tid\":0,\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"round\":{},"
                               "\"H\":{},\"steps\":{},\"loss\":{:.6g}}}}}",
                               e.round, e.pid, ts, dur, e.round, e.bytes, e.other, e.value);
                break;
            case Type::inner_step:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step\",\"pid\":{},"
                               "\"tid\":0,\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"step\":{},"
                               "\"round\":{}}}}}",
                               e.pid, ts, dur, e.round, e.bytes);
                break;
            case Type::wait: {
                std::string name = "wait";
                const char* cause = "none";
                switch (static_cast<WaitCause::Kind>(e.kind)) {
                    case WaitCause::message:
                        name = fmt::format("wait for peer {}", e.other);
                        cause = "message";
                        break;
                    case WaitCause::deadline:
                        name = "wait (deadline)";
                        cause = "deadline";
                        break;
                    case WaitCause::failure:
                        name = fmt::format("wait (peer {} failed)", e.other);
                        cause = "failure";
                        break;
                    case WaitCause::start:
                        name = "wait (start)";
                        cause = "start";
                        break;
                    case WaitCause::finish:
                        name = "wait (finishing)";
                        cause = "finish";
                        break;
                    case WaitCause::none:
                        break;
                }
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"X\",\"cat\":\"wait\",\"name\":\"{}\",\"pid\":{},"
                               "\"tid\":0,\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"cause\":\"{}\","
                               "\"peer\":{},\"round\":{}}}}}",
                               name, e.pid, ts, dur, cause, e.other, e.round);
                break;
            }
            case Type::send:
            case Type::receive: {
                const bool out = e.type == Type::send;
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"{}\",\"name\":\"{} {}\","
                               "\"pid\":{},\"tid\":1,\"ts\":{:.3f},\"args\":{{\"{}\":{},"
                               "\"bytes\":{},\"round\":{},\"kind\":\"{}\"}}}}",
                               out ? "send" : "receive", out ? "send to" : "receive from", e.other,
                               e.pid, ts, out ? "to" : "from", e.other, e.bytes, e.round,
                               kind_name(e.kind));
                break;
            }
            case Type::failure:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"failure\",\"name\":\"failed\","
                               "\"pid\":{},\"tid\":1,\"ts\":{:.3f}}}",
                               e.pid, ts);
                break;
            case Type::peer_failed:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"failure\",\"name\":\"peer {} "
                               "failed\",\"pid\":{},\"tid\":1,\"ts\":{:.3f},\"args\":{{\"peer\":{}"
                               "}}}}",
                               e.other, e.pid, ts, e.other);
                break;
            case Type::evaluation:
                fmt::format_to(std::back_inserter(b),
                               "{{\"ph\":\"X\",\"cat\":\"evaluation\",\"name\":\"evaluation\","
                               "\"pid\":{},\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{"
                               "\"accuracy\":{:.6g},\"loss\":{:.6g}}}}}",
                               e.pid, e.pid == kJobTrack ? 0 : 2, ts, dur, e.value, e.value2);
                break;
        }
        if (b.size() > (1 << 20)) flush();
    }
    json::Json other = info_;
    other["tool"] = "gossamer";
    other["clock"] = clock_;
    other["origin_unix_us"] = origin_unix_us_;
    other["peers"] = peers_seen_;
    other["sampling"] = {{"every", every_},
                         {"rule", kSamplingRule},
                         {"events", events_.size()},
                         {"max_events", max_events_}};
    fmt::format_to(std::back_inserter(b), "\n],\"otherData\":{}}}\n", other.dump());
    flush();
    if (std::fflush(f.get()) != 0)
        throw ConfigError(path, "--trace",
                          fmt::format("cannot write the trace: {}", std::strerror(errno)),
                          "free space or choose another path");
}

namespace {

json::Json load_trace(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(path, "", "cannot open the trace file", "check the path");
    json::Json doc;
    try {
        doc = json::Json::parse(in);
    } catch (const json::Json::exception& ex) {
        throw ConfigError(path, "", fmt::format("not JSON ({})", ex.what()),
                          "give a trace written by --trace");
    }
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
        throw ConfigError(path, "traceEvents", "missing or not an array",
                          "give a trace written by --trace");
    return doc;
}

}  // namespace

void merge_files(const std::vector<std::string>& inputs, const std::string& out) {
    // Each file's start on rank 0's clock: its host's system clock at the start, plus the
    // offset to rank 0's the bootstrap estimated (a file without one: its host's clock as is).
    std::vector<json::Json> docs;
    std::vector<double> starts;
    double origin = std::numeric_limits<double>::infinity();
    std::size_t aligned = 0;
    double residual = 0;
    for (const auto& path : inputs) {
        docs.push_back(load_trace(path));
        const json::Json other = docs.back().value("otherData", json::Json::object());
        double start = other.value("origin_unix_us", 0.0);
        if (other.contains("clock_offset") && other["clock_offset"].is_object()) {
            start += other["clock_offset"].value("offset_us", 0.0);
            residual = std::max(residual, other["clock_offset"].value("residual_us", 0.0));
            ++aligned;
        }
        starts.push_back(start);
        origin = std::min(origin, start);
    }
    json::Json merged = {{"displayTimeUnit", "ms"}, {"traceEvents", json::Json::array()}};
    json::Json files = json::Json::array();
    std::int64_t every = 1;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        auto& doc = docs[i];
        const json::Json other = doc.value("otherData", json::Json::object());
        const double shift = starts[i] - origin;
        for (auto& e : doc["traceEvents"]) {
            if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + shift;
            merged["traceEvents"].push_back(std::move(e));
        }
        if (other.contains("sampling"))
            every = std::max(every, other["sampling"].value("every", std::int64_t{1}));
        files.push_back({{"file", inputs[i]}, {"shift_us", shift}, {"otherData", other}});
    }
    std::string clock;
    if (aligned == docs.size())
        clock = "steady, aligned to rank 0's system clock by offsets estimated at the bootstrap";
    else if (aligned == 0)
        clock = "steady, aligned by each host's system clock at the peer's start";
    else
        clock = fmt::format(
            "steady, {} of {} files aligned to rank 0's system clock by offsets estimated at the "
            "bootstrap, the others by their hosts' system clocks",
            aligned, docs.size());
    merged["otherData"] = {{"tool", "gossamer"},
                           {"clock", clock},
                           {"origin_unix_us", origin},
                           {"sampling", {{"every", every}, {"rule", kSamplingRule}}},
                           {"files", files}};
    // The worst residual of the aligned files: any two of their tracks agree within twice it.
    if (aligned > 0) merged["otherData"]["clock_residual_us"] = residual;
    std::error_code ec;
    const auto parent = std::filesystem::path(out).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::ofstream f(out);
    f << merged.dump() << "\n";
    if (!f)
        throw ConfigError(out, "--trace", "cannot write the merged trace",
                          "choose a writable path");
}

std::string tagged_path(const std::string& file, const std::string& tag) {
    const std::filesystem::path p(file);
    return (p.parent_path() / (p.stem().string() + "-" + tag + p.extension().string())).string();
}

void check_writable(const std::string& path, const std::string& flag) {
    const std::filesystem::path p(path);
    std::error_code ec;
    if (path.empty() || std::filesystem::is_directory(p, ec) || !p.has_filename())
        throw ConfigError("", flag, fmt::format("\"{}\" is a folder, not a file name", path),
                          "give a file name such as out/trace.json");
    const bool existed = std::filesystem::exists(p, ec);
    if (!p.parent_path().empty()) std::filesystem::create_directories(p.parent_path(), ec);
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "a"));
    if (!f)
        throw ConfigError("", flag, fmt::format("cannot create {}: {}", path, std::strerror(errno)),
                          "choose a writable path");
    f.reset();
    if (!existed) std::filesystem::remove(p, ec);
}

std::vector<std::pair<int, PeerTotals>> read_totals(const std::string& path) {
    const json::Json doc = load_trace(path);
    std::map<int, PeerTotals> by_peer;
    for (const auto& e : doc["traceEvents"]) {
        if (!e.is_object() || !e.contains("pid") || !e.contains("cat")) continue;
        const int pid = e["pid"].get<int>();
        if (pid == kJobTrack) continue;
        PeerTotals& t = by_peer[pid];
        const std::string cat = e["cat"].get<std::string>();
        const double dur = e.value("dur", 0.0) / 1e6;
        if (cat == "step") {
            t.busy += dur;
            ++t.steps;
        } else if (cat == "wait") {
            t.idle += dur;
            ++t.waits;
        } else if (cat == "send") {
            ++t.sends;
            t.bytes_sent += e["args"].value("bytes", std::uint64_t{0});
        } else if (cat == "receive") {
            ++t.receives;
        }
    }
    return {by_peer.begin(), by_peer.end()};
}

}  // namespace gossamer::trace
