// Staged transfers: the chunk plan and the UCX probe need no device; the round trip does.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "cuda/device.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/cuda/staging.hpp"

namespace cuda = gossamer::cuda;

TEST_CASE("staging_plan covers the bytes in order, round robin over the slots") {
    const auto plan = cuda::staging_plan(10, 4, 2);
    REQUIRE(plan.size() == 3);
    CHECK(plan[0].offset == 0);
    CHECK(plan[0].size == 4);
    CHECK(plan[1].slot == 1);
    CHECK(plan[2].offset == 8);
    CHECK(plan[2].size == 2);
    CHECK(plan[2].slot == 0);
    CHECK(cuda::staging_plan(0, 4, 2).empty());
    CHECK(cuda::staging_plan(8, 4, 3).size() == 2);
    CHECK_THROWS_WITH_AS(cuda::staging_plan(8, 0, 2), doctest::Contains("at least 1"),
                         gossamer::Error);
    CHECK_THROWS_AS(cuda::staging_plan(8, 4, 0), gossamer::Error);
}

TEST_CASE("parse_ucx_info finds CUDA memory domains and ignores host-only builds") {
    const char* debian =
        "#\n# Memory domain: self\n#     Component: self\n#      Transport: self\n"
        "# Memory domain: tcp\n#      Transport: tcp\n# Memory domain: cma\n";
    CHECK_FALSE(cuda::parse_ucx_info(debian).cuda);
    CHECK(std::string(cuda::transfer_path(cuda::parse_ucx_info(debian))) == "staging");
    const char* with_cuda =
        "# Memory domain: posix\n#     Component: posix\n"
        "# Memory domain: cuda_cpy\n#     Component: cuda_cpy\n#      Transport: cuda_copy\n";
    const auto s = cuda::parse_ucx_info(with_cuda);
    CHECK(s.cuda);
    CHECK(s.evidence == "Memory domain: cuda_cpy");
    CHECK(std::string(cuda::transfer_path(s)) == "ucx-cuda");
    CHECK(cuda::parse_ucx_info("#   memory types: host (access,reg), cuda (access,alloc,reg)\n")
              .cuda);
    CHECK_FALSE(
        cuda::parse_ucx_info("# Transport: rc_mlx5 (cuda is not mentioned here? no)\n").cuda);
    CHECK_FALSE(cuda::parse_ucx_info("").cuda);
}

TEST_CASE("probe_ucx_memory runs ucx_info within its timeout and agrees with its evidence") {
    const auto s = cuda::probe_ucx_memory(std::chrono::seconds(5));
    CHECK(s.cuda == !s.evidence.empty());
    MESSAGE("transfer path here: " << cuda::transfer_path(s) << " " << s.evidence);
}

TEST_CASE("DeviceStaging moves a buffer down and up through pinned chunks") {
    if (!gossamer::test::cuda_device_or_skip()) return;
    const std::size_t bytes = 10001;
    std::vector<std::byte> data(bytes);
    for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>(i * 7 + 1);
    cuda::DeviceBuffer dev(bytes), back(bytes);
    cuda::copy_to_device(dev.data(), data.data(), bytes);
    cuda::DeviceStaging staging({1000, 3, std::chrono::milliseconds(10000)});

    std::vector<std::byte> received(bytes);
    std::size_t next = 0;
    staging.send_from_device(dev.data(), bytes, [&](std::span<const std::byte> c, std::size_t off) {
        CHECK(off == next);  // chunks arrive in order
        std::copy(c.begin(), c.end(), received.begin() + static_cast<std::ptrdiff_t>(off));
        next += c.size();
    });
    CHECK(next == bytes);
    CHECK(received == data);

    staging.receive_to_device(back.data(), bytes, [&](std::span<std::byte> c, std::size_t off) {
        std::copy_n(received.begin() + static_cast<std::ptrdiff_t>(off), c.size(), c.begin());
    });
    std::vector<std::byte> check(bytes);
    cuda::copy_to_host(check.data(), back.data(), bytes);
    CHECK(check == data);
}

TEST_CASE("DeviceStaging works again after a sink gave up in the middle of a transfer") {
    if (!gossamer::test::cuda_device_or_skip()) return;
    const std::size_t bytes = 5000;
    std::vector<std::byte> data(bytes, std::byte{3});
    cuda::DeviceBuffer dev(bytes);
    cuda::copy_to_device(dev.data(), data.data(), bytes);
    cuda::DeviceStaging staging({1000, 2, std::chrono::milliseconds(10000)});
    int chunks = 0;
    CHECK_THROWS_AS(staging.send_from_device(dev.data(), bytes,
                                             [&](std::span<const std::byte>, std::size_t) {
                                                 if (++chunks == 2) throw gossamer::Error("gone");
                                             }),
                    gossamer::Error);
    std::vector<std::byte> received;
    staging.send_from_device(dev.data(), bytes, [&](std::span<const std::byte> c, std::size_t) {
        received.insert(received.end(), c.begin(), c.end());
    });
    CHECK(received == data);
}
