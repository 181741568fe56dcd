#include "gossamer/optimizers/protocol/ring.hpp"

namespace gossamer::proto::ring {

namespace {

int mod(int a, int n) noexcept {
    return ((a % n) + n) % n;
}

}  // namespace

Range split(Range whole, int parts, int index) noexcept {
    const std::size_t p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(index);
    const std::size_t base = whole.size() / p, extra = whole.size() % p;
    // Parts before i hold base elements each plus one for every one of them below `extra`.
    const std::size_t begin = whole.begin + i * base + (i < extra ? i : extra);
    return {begin, begin + base + (i < extra ? 1 : 0)};
}

Range segment(std::size_t length, int n, int s) noexcept {
    return split({0, length}, n, s);
}

Range chunk(std::size_t length, int n, int s, int chunks, int c) noexcept {
    return split(segment(length, n, s), chunks, c);
}

int steps(int n) noexcept {
    return 2 * (n - 1);
}

Step step(int rank, int n, int k) noexcept {
    Step s;
    s.send_to = mod(rank + 1, n);
    s.recv_from = mod(rank - 1, n);
    if (k < n - 1) {
        s.send_segment = mod(rank - k, n);
        s.recv_segment = mod(rank - k - 1, n);
        s.reduce = true;
    } else {
        const int j = k - (n - 1);
        s.send_segment = mod(rank + 1 - j, n);
        s.recv_segment = mod(rank - j, n);
        s.reduce = false;
    }
    return s;
}

int owned_segment(int rank, int n) noexcept {
    return mod(rank + 1, n);
}

}  // namespace gossamer::proto::ring
