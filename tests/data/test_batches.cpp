#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/sharding.hpp"

using namespace gossamer;

namespace {

// n samples with features [i, 10 i, 100 i] and target i (regression).
Dataset regression(std::int64_t n) {
    Dataset d;
    d.name = "reg";
    d.features = 3;
    for (std::int64_t i = 0; i < n; ++i) {
        for (float scale : {1.0f, 10.0f, 100.0f}) d.x.push_back(scale * static_cast<float>(i));
        d.targets.push_back(static_cast<float>(i));
    }
    return d;
}

bool is_permutation_of_iota(std::vector<std::int64_t> v) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != static_cast<std::int64_t>(i)) return false;
    return true;
}

// The sample index a regression batch row holds (its target).
std::vector<std::int64_t> rows_of(const Batch& b) {
    std::vector<std::int64_t> out;
    for (int i = 0; i < b.size; ++i) out.push_back(static_cast<std::int64_t>(b.targets[i]));
    return out;
}

}  // namespace

TEST_CASE("epoch permutations are permutations, fixed by (seed, epoch), different per epoch") {
    const auto p = epoch_permutation(1000, 7, 0);
    CHECK(p.size() == 1000);
    CHECK(is_permutation_of_iota(p));
    CHECK(p == epoch_permutation(1000, 7, 0));
    CHECK(p != epoch_permutation(1000, 7, 1));
    CHECK(p != epoch_permutation(1000, 8, 0));
    std::vector<std::int64_t> identity(1000);
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(p != identity);
    CHECK(epoch_permutation(0, 1, 0).empty());
    CHECK(epoch_permutation(1, 1, 0) == std::vector<std::int64_t>{0});
}

TEST_CASE("every position is equally likely under Fisher-Yates") {
    // Where does element 0 land? Uniform over 4 positions across many epochs.
    std::vector<int> where(4, 0);
    for (std::uint64_t e = 0; e < 4000; ++e) {
        const auto p = epoch_permutation(4, 3, e);
        ++where[static_cast<std::size_t>(std::find(p.begin(), p.end(), 0) - p.begin())];
    }
    for (int c : where) CHECK(std::abs(c - 1000) < 120);
}

TEST_CASE("gather_batch copies rows contiguously and points the Batch at them") {
    const auto d = regression(10);
    BatchBuffer buf;
    const std::vector<std::int64_t> rows = {7, 2, 9};
    const Batch b = gather_batch(d, rows, buf);
    CHECK(b.size == 3);
    CHECK(b.features == 3);
    CHECK(b.labels == nullptr);
    REQUIRE(b.targets != nullptr);
    CHECK(b.x == buf.x.data());
    const std::vector<float> expect = {7, 70, 700, 2, 20, 200, 9, 90, 900};
    CHECK(std::vector<float>(b.x, b.x + 9) == expect);
    CHECK(rows_of(b) == rows);

    Dataset cls;
    cls.features = 1;
    cls.classes = 2;
    cls.x = {0.5f, 1.5f};
    cls.labels = {1, 0};
    const Batch c = gather_batch(cls, std::vector<std::int64_t>{1, 0}, buf);
    CHECK(c.targets == nullptr);
    REQUIRE(c.labels != nullptr);
    CHECK(c.labels[0] == 0);
    CHECK(c.labels[1] == 1);
    CHECK(c.x[0] == 1.5f);
}

TEST_CASE("a loader walks one epoch in its permutation order, then reshuffles") {
    const auto d = regression(10);
    BatchLoader loader(d, 3, 42);
    CHECK(loader.batches_per_epoch() == 3);  // drop_last: the 10th sample waits
    std::vector<std::int64_t> seen;
    while (auto b = loader.next()) {
        CHECK(b->size == 3);
        for (auto r : rows_of(*b)) seen.push_back(r);
    }
    const auto order = epoch_permutation(10, 42, 0);
    CHECK(seen == std::vector<std::int64_t>(order.begin(), order.begin() + 9));
    CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == 9);

    loader.start_epoch(1);
    CHECK(loader.epoch() == 1);
    const auto first = rows_of(*loader.next());
    const auto order1 = epoch_permutation(10, 42, 1);
    CHECK(first == std::vector<std::int64_t>(order1.begin(), order1.begin() + 3));
}

TEST_CASE("at_step maps a global step to its epoch and batch") {
    const auto d = regression(12);
    BatchLoader a(d, 4, 5), b(d, 4, 5);
    // Step 7 is epoch 2 (3 batches per epoch), batch 1.
    const auto order = epoch_permutation(12, 5, 2);
    CHECK(rows_of(a.at_step(7)) == std::vector<std::int64_t>(order.begin() + 4, order.begin() + 8));
    CHECK(a.epoch() == 2);
    // Random access and a sequential walk agree.
    for (std::int64_t s = 0; s < 9; ++s) CHECK(rows_of(a.at_step(s)) == rows_of(b.at_step(s)));
    CHECK_THROWS_AS(a.at_step(-1), Error);
}

TEST_CASE("without drop_last the last batch of an epoch is short") {
    const auto d = regression(10);
    BatchLoader loader(d, 4, 1, 0, false);
    CHECK(loader.batches_per_epoch() == 3);
    std::vector<int> sizes;
    while (auto b = loader.next()) sizes.push_back(b->size);
    CHECK(sizes == std::vector<int>{4, 4, 2});
}

TEST_CASE("a loader refuses a batch larger than its shard, naming the peer") {
    const auto d = regression(100);
    try {
        BatchLoader loader(d, 128, 1, 3);
        FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()) ==
              "batch_size: batch size 128 is larger than peer 3's shard of 100 samples; lower "
              "batch_size or use fewer peers");
    }
    CHECK_THROWS_AS(BatchLoader(d, 0, 1), ConfigError);
    CHECK_NOTHROW(BatchLoader(d, 100, 1));
}
