// scripts/lab/experiment.sh (docs/operations/lab.md, "The experiment"): its --quick smoke run in a
// real lab (real peers and gossamer sim side by side, the table and the plots), and its bad flags.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

using namespace gossamer::test;

namespace {

const std::string kScript = std::string(GOSSAMER_SOURCE_DIR) + "/scripts/lab/experiment.sh";

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("experiment.sh: bad flags are one line and exit 2, before anything runs") {
        TempDir dir;
        const std::string out = (dir.path() / "o").string();
        for (const std::string args :
             {"--seeds 0", "--seeds x", "--algorithms dpsgd,gossipx", "--frobnicate",
              "--eval-interval soon", "--eval-interval 0", "--timeout 0", "--seeds",
              "--clusters uneven9", "--clusters", "--part lab", "--part"}) {
            CAPTURE(args);
            // Bounded even if a bad flag got through: the script would then start a lab.
            const auto r = run("GOSSAMER=" GOSSAMER_BINARY " timeout 60 " + kScript + " --out " +
                               out + " " + args);
            CHECK(r.status == 2);
            CHECK(lines(r.err) == 1);
            CHECK(r.err.rfind("scripts/lab/experiment.sh: ", 0) == 0);
            CHECK_FALSE(std::filesystem::exists(out));
        }
        const auto help = run(kScript + " --help");
        CHECK(help.status == 0);
        CHECK(help.out.find("--quick") != std::string::npos);
    }

    TEST_CASE("experiment.sh --quick: real peers and sim on both clusters, the table, the plots") {
        if (!have_netns()) return;
        TempDir dir;
        const auto out = dir.path() / "exp";
        // Bounded: the script gives every launch 180 s; the whole smoke run takes about 40 s.
        const auto r = run("GOSSAMER=" GOSSAMER_BINARY " timeout 600 " + kScript +
                           " --quick --out " + out.string());
        INFO(r.err);
        REQUIRE(r.status == 0);
        const std::string table = slurp(out / "table.md");
        for (const char* part : {"### uneven8", "### homogeneous8", "| allreduce | ", "| async | ",
                                 "sim predicts async's time to the target"})
            CHECK_MESSAGE(table.find(part) != std::string::npos, part);
        CHECK(table.find("| allreduce | — / —") == std::string::npos);  // both sides measured
        const auto j = nlohmann::json::parse(slurp(out / "table.json"));
        for (const char* cluster : {"uneven8", "homogeneous8"}) {
            CAPTURE(cluster);
            const auto& rows = j["clusters"][cluster]["rows"];
            for (const char* algo : {"allreduce", "async"}) {
                CAPTURE(algo);
                for (const char* side : {"real", "sim"}) {
                    const auto& r = rows[algo][side];
                    CHECK(r["final_accuracy"][0].get<double>() > 0.3);
                    CHECK(r["per_iteration"][0].get<double>() >= 0.15);  // steps padded to 150 ms
                    CHECK(r["mb_sent_per_peer"][0].get<double>() > 0);
                }
            }
            for (const char* plot : {"-accuracy-time.svg", "-accuracy-bytes.svg"}) {
                const std::string svg = slurp(out / (std::string(cluster) + plot));
                CHECK(svg.rfind("<svg ", 0) == 0);
                CHECK(svg.find("</svg>") != std::string::npos);
                // allreduce and async, lab and sim: four curves.
                std::size_t curves = 0;
                for (auto at = svg.find("<polyline"); at != std::string::npos;
                     at = svg.find("<polyline", at + 1))
                    ++curves;
                CHECK(curves == 4);
            }
        }
        // The uneven cluster's straggler (rank 7, 3x slower) holds all-reduce back in the lab
        // and in sim alike; async does not wait for it.
        const auto& uneven = j["clusters"]["uneven8"]["rows"];
        CHECK(uneven["allreduce"]["real"]["idle_share"][0].get<double>() > 0.4);
        CHECK(uneven["allreduce"]["sim"]["idle_share"][0].get<double>() > 0.4);
        CHECK(uneven["async"]["real"]["idle_share"][0].get<double>() < 0.2);
    }
}
