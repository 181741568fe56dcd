#pragma once
/// Clock offsets between hosts, estimated at the bootstrap (docs/modules/bootstrap.md, "Clock
/// offsets"): a joiner sends rank 0 a few clock queries right after its handshake; each answer
/// carries rank 0's system-clock time. Times are microseconds of the system clock since the
/// Unix epoch.

#include <cstdint>
#include <span>

namespace gossamer::bootstrap {

/// One round trip: the joiner's clock when it sent the query and when the answer came back,
/// and rank 0's clock when it answered.
struct ClockSample {
    std::int64_t sent_us = 0;
    std::int64_t server_us = 0;
    std::int64_t received_us = 0;
};

/// This peer's clock against rank 0's: rank 0's time = this peer's time + offset_us, give or
/// take residual_us (half the round trip of the sample used: wherever rank 0 read its clock
/// inside that round trip, the true offset lies within it).
struct ClockOffset {
    double offset_us = 0;
    double residual_us = 0;
    int samples = 0;  ///< round trips measured (0: rank 0 itself, or not measured)
};

/// Takes the sample with the smallest round trip: offset = server - (sent + received) / 2,
/// residual = (received - sent) / 2. Throws std::invalid_argument for no samples or one whose
/// answer came back before its query left (a clock that jumped back).
ClockOffset estimate_offset(std::span<const ClockSample> samples);

}  // namespace gossamer::bootstrap
