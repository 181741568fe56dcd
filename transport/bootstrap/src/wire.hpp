#pragma once
// The bootstrap's frames (docs/modules/bootstrap.md, "Frames"): a 12-byte header (magic, version,
// kind, body length) and a little-endian body. Decoding checks every length against the bytes
// present and the limits below, and throws Malformed instead of reading past them.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "gossamer/bootstrap/bootstrap.hpp"

namespace gossamer::bootstrap::wire {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint8_t kMagic[4] = {'G', 'S', 'B', 'T'};
// 2: the hello carries the job's settings (one digest and description per field).
// 3: views (propose, ack, install, query) and the expelled notice.
// 4: the hello carries the sender's listen address, the table every peer's (count-only jobs).
// 5: clock queries and replies after the welcome (clock offsets between hosts), and the suspect
//    report (a failure only a transport saw).
// 6: rejoin (a member follows the next coordinator after losing the one it had: succession),
//    join and peer_joined (a peer enters the running job).
inline constexpr std::uint16_t kVersion = 6;
inline constexpr std::size_t kHeaderBytes = 12;
inline constexpr std::uint32_t kMaxBody = 64u << 20;  // a table of many peers' blobs
inline constexpr std::uint32_t kMaxBlob = 1u << 20;   // one address blob
inline constexpr std::uint32_t kMaxToken = 4096;      // job token bytes
inline constexpr std::uint32_t kMaxText = 64u << 10;  // layout descriptions, reasons
inline constexpr std::uint32_t kMaxSettings = 256;    // settings in one hello
inline constexpr std::uint32_t kMaxField = 256;       // one setting's field name
inline constexpr std::uint32_t kMaxValue = 4096;      // one setting's description
inline constexpr std::uint32_t kMaxHost = 255;        // a host name or address (DNS's limit)
// The largest hello decode_hello accepts (every field at its limit): the most a connection
// that has not yet shaken hands may make rank 0 read.
inline constexpr std::uint32_t kMaxHello =
    4 + 4 + 4 * 8 + (4 + kMaxToken) + (4 + kMaxText) + (4 + kMaxBlob) + 4 +
    kMaxSettings * (4 + kMaxField + 8 + 4 + kMaxValue) + (4 + kMaxHost) + 4;

enum class Kind : std::uint8_t {
    hello = 1,      // joiner -> rank 0: who I am, what I run, my blob
    welcome = 2,    // rank 0 -> joiner: handshake accepted
    refuse = 3,     // rank 0 -> joiner: reason code and text, then close
    table = 4,      // rank 0 -> all: every blob; the start-up barrier is passed
    abort = 5,      // rank 0 -> all: the rendezvous failed (reason code and text)
    heartbeat = 6,  // both ways, every heartbeat_interval
    peer_gone = 7,  // rank 0 -> all: rank r vanished (rank and text)
    bye = 8,        // either way: this side closes on purpose
    // Views (docs/modules/bootstrap.md, "Views"); bodies are Notices: code = view number, ranks =
    // members.
    view_propose = 9,   // rank 0 -> the proposed view's members
    view_ack = 10,      // member -> rank 0: code = the number it acknowledges
    view_install = 11,  // rank 0 -> members: installed (also the answer to a query)
    view_query = 12,    // peer -> rank 0: am I still a member? (empty body)
    expelled = 13,      // rank 0 -> a peer it declared lost: code = its rank, text = why
    clock_query = 14,   // joiner -> rank 0, after the welcome: a ClockReading (its own clock)
    clock_reply = 15,   // rank 0 -> joiner: the query's sequence number and rank 0's clock
    // A failure only a peer's transport saw (a send timeout on a cut edge): code = the rank it
    // failed, text = why. Rank 0 turns it into a loss (docs/modules/bootstrap.md, "Transport
    // failures").
    suspect = 16,  // member -> rank 0
    // A member that lost its coordinator, to the lowest live rank of its view (a Hello without
    // blob or settings: rank, job, peer list, token). Answered by welcome, or by a refuse whose
    // code is Reason::not_coordinator (it still follows another) or not_member.
    rejoin = 17,
    // A peer entering the running job (Bootstrap::join): a full Hello. Answered by welcome and
    // the table, then the view that holds it; or refuse (not_coordinator: try another rank).
    join = 18,
    // Coordinator -> members, when a view that adds a joined rank is installed: code = its
    // rank, text = the line. Right before it, a `table` frame with every current blob.
    peer_joined = 19,
    // Member -> coordinator: its transport replaced the joined rank's endpoint (code = the
    // rank); the coordinator tells the joiner its view once every member did, or after
    // io_timeout, so that the joiner's first messages are not dropped as a lost peer's.
    readmitted = 20,
};
inline constexpr Kind kLastKind = Kind::readmitted;

/// Bytes that are not this protocol; what() says what was wrong.
class Malformed : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct Header {
    std::uint16_t version = kVersion;
    Kind kind = Kind::heartbeat;
    std::uint32_t length = 0;
};

/// Checks magic, kind and length (not the version: the caller refuses that with a reason).
Header decode_header(std::span<const std::uint8_t> bytes);
/// Header followed by body.
Bytes frame(Kind kind, std::span<const std::uint8_t> body = {});

struct Hello {
    std::uint32_t rank = 0;
    std::uint32_t n = 0;
    std::uint64_t job_id = 0;
    std::uint64_t peers_fingerprint = 0;
    std::uint64_t model_size = 0;
    std::uint64_t layout_fingerprint = 0;
    std::string token;
    std::string layout_text;  // PartitionLayout::describe(), for error messages
    Blob address;
    std::vector<Setting> settings;  // field, digest and value each (not the fix)
    Endpoint listen;                // where the sender listens: its reachable host and its port
};
Bytes encode(const Hello& hello);
Hello decode_hello(std::span<const std::uint8_t> body);

/// Body of refuse, abort and peer_gone: a code (a Reason, or the lost rank), the ranks it is
/// about (the missing ones of an abort) and one line of text.
struct Notice {
    std::uint32_t code = 0;
    std::vector<std::uint32_t> ranks;
    std::string text;
};
Bytes encode(const Notice& notice);
Notice decode_notice(std::span<const std::uint8_t> body);

/// Body of clock_query and clock_reply: a sequence number and a system-clock time in
/// microseconds since the Unix epoch (the sender's).
struct ClockReading {
    std::uint32_t seq = 0;
    std::int64_t unix_us = 0;
};
Bytes encode(const ClockReading& reading);
ClockReading decode_clock(std::span<const std::uint8_t> body);

/// The table rank 0 sends at the barrier: every peer's blob and listen address, by rank.
struct Table {
    std::vector<Blob> blobs;
    std::vector<Endpoint> endpoints;
};
/// `endpoints` may be empty (each is then sent as an empty host and port 0).
Bytes encode_table(const std::vector<Blob>& blobs, const std::vector<Endpoint>& endpoints = {});
/// Throws Malformed unless the table holds exactly n blobs and n endpoints.
Table decode_full_table(std::span<const std::uint8_t> body, std::uint32_t n);
/// The blobs of decode_full_table.
std::vector<Blob> decode_table(std::span<const std::uint8_t> body, std::uint32_t n);

/// FNV-1a over every host and port, in rank order: peers started from the same topology agree.
/// A count-only job (some port is 0: learnt at the rendezvous) hashes only its size, since each
/// peer knows a different part of the list up front.
std::uint64_t peers_fingerprint(const std::vector<Endpoint>& peers);
/// The fingerprint of a count-only job of n peers.
std::uint64_t count_only_fingerprint(std::size_t n);
/// Whether `peers` is a count-only job's list: some port is 0 (docs/modules/bootstrap.md).
bool count_only(const std::vector<Endpoint>& peers);

}  // namespace gossamer::bootstrap::wire
