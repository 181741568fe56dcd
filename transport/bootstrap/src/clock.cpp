#include "gossamer/bootstrap/clock.hpp"

#include <stdexcept>
#include <string>

namespace gossamer::bootstrap {

ClockOffset estimate_offset(std::span<const ClockSample> samples) {
    if (samples.empty()) throw std::invalid_argument("estimate_offset: no clock samples");
    const ClockSample* best = nullptr;
    for (const auto& s : samples) {
        if (s.received_us < s.sent_us)
            throw std::invalid_argument("estimate_offset: a sample received " +
                                        std::to_string(s.sent_us - s.received_us) +
                                        " us before it was sent (the clock went back)");
        if (!best || s.received_us - s.sent_us < best->received_us - best->sent_us) best = &s;
    }
    // The least queued round trip bounds the offset most tightly (NTP's minimum-delay filter).
    const double mid =
        (static_cast<double>(best->sent_us) + static_cast<double>(best->received_us)) / 2;
    return {static_cast<double>(best->server_us) - mid,
            static_cast<double>(best->received_us - best->sent_us) / 2,
            static_cast<int>(samples.size())};
}

}  // namespace gossamer::bootstrap
