// gossamer report as a user runs it (docs/operations/report.md): the page of a sim run and of a
// launch run parses as HTML, holds the table and the plots and references nothing outside itself;
// bad folders are refused with one line and exit 2; in headless Chromium (component chromium) the
// page loads without a console message and draws its table and charts.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launch_job.hpp"
#include "support/optional.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
}

// Whether every element is closed in order (void elements and <x/> need no end tag): the page
// parses as HTML without the parser's error recovery. Returns "" or what is wrong.
std::string check_tags(const std::string& html) {
    std::vector<std::string> open;
    const std::vector<std::string> voids = {"meta", "br", "hr", "img", "input", "link"};
    for (std::size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
        const auto end = html.find('>', i);
        if (end == std::string::npos) return "an unclosed <";
        const std::string tag = html.substr(i + 1, end - i - 1);
        if (tag.empty() || tag[0] == '!') continue;  // <!DOCTYPE html>
        const bool closing = tag[0] == '/';
        const auto name_end = tag.find_first_of(" />", closing ? 1 : 0);
        const std::string name = tag.substr(closing ? 1 : 0, name_end - (closing ? 1 : 0));
        if (closing) {
            if (open.empty() || open.back() != name)
                return "</" + name + "> closes <" + (open.empty() ? "" : open.back()) + ">";
            open.pop_back();
        } else if (tag.back() != '/' &&
                   std::find(voids.begin(), voids.end(), name) == voids.end()) {
            open.push_back(name);
        }
    }
    return open.empty() ? "" : "<" + open.back() + "> never closed";
}

void check_self_contained(const std::string& html) {
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(check_tags(html) == "");
    CHECK(html.find("<script") == std::string::npos);
    CHECK(html.find("<link") == std::string::npos);
    CHECK(html.find("src=") == std::string::npos);
    CHECK(html.find("href=\"http") == std::string::npos);
    CHECK(html.find("url(http") == std::string::npos);
    CHECK(html.find("@import") == std::string::npos);
}

std::string chromium_missing() {
    return gossamer::test::missing_program("chromium", "scripts/deps.sh --bench installs chromium");
}

// Headless Chromium on a page: the DOM it built (stdout) and its log (stderr), where every
// console message, a script error or a resource that failed to load, is a ":CONSOLE" line.
gossamer::test::RunResult chromium(const std::string& args, const fs::path& page) {
    return run(
        "timeout -k 5 90 chromium --headless --no-sandbox --disable-gpu "
        "--enable-logging=stderr --v=0 " +
        args + " 'file://" + page.string() + "'");
}

}  // namespace

TEST_CASE("the report page loads in headless Chromium without a console message, and draws") {
    if (!gossamer::test::have_component("chromium", chromium_missing())) return;
    LaunchJob job;
    const auto out = job.dir.path() / "sim";
    auto r = run(kBin + " sim --topology " + job.topology + " --config " + job.config +
                 " --cluster " + job.cluster + " --algorithms dpsgd,sgp --out " + out.string() +
                 " --trace " + (out / "trace.json").string());
    REQUIRE(r.status == 0);
    r = run(kBin + " report " + out.string() + " --topology " + job.topology);
    REQUIRE(r.status == 0);
    r = chromium("--dump-dom", out / "report.html");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find(":CONSOLE") == std::string::npos);
    CHECK(count(r.out, "<table id=\"summary\">") == 1);
    CHECK(count(r.out, "<svg") == 13);  // the browser built every chart and both timelines
    const auto shot = job.dir.path() / "shot.png";
    r = chromium("--hide-scrollbars --window-size=1280,2400 --screenshot=" + shot.string(),
                 out / "report.html");
    REQUIRE(r.status == 0);
    const auto png = slurp(shot);
    CHECK(png.rfind("\x89PNG", 0) == 0);
    CHECK(png.size() > 20'000);  // a drawn page, not a blank one (about 140 KB here)
    // The console check can fail: a page with a script error shows it.
    std::ofstream(job.dir.path() / "bad.html")
        << "<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>";
    r = chromium("--dump-dom", job.dir.path() / "bad.html");
    CHECK(r.err.find(":CONSOLE") != std::string::npos);
}

TEST_CASE("the report of a sim run holds the table and the plots and loads nothing") {
    LaunchJob job;
    const auto out = job.dir.path() / "sim";
    auto r = run(kBin + " sim --topology " + job.topology + " --config " + job.config +
                 " --cluster " + job.cluster + " --algorithms dpsgd,sgp --out " + out.string() +
                 " --trace " + (out / "trace.json").string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    r = run(kBin + " report " + out.string() + " --topology " + job.topology);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("report.html") != std::string::npos);
    const auto html = slurp(out / "report.html");
    check_self_contained(html);
    CHECK(count(html, "<table id=\"summary\">") == 1);
    CHECK(count(html, "<tr><td>dpsgd</td>") == 1);
    CHECK(count(html, "<tr><td>sgp</td>") == 1);
    // accuracy/time, loss/time, accuracy/bytes, idle, topology, three heatmaps (bytes,
    // staleness, weights) and a timeline per algorithm
    CHECK(count(html, "<svg") == 13);
    // The timelines: one bar per step and per wait of the traces (4 peers; a wait also before
    // the first step of a peer that starts late), in seconds on the page's axis.
    CHECK(count(html, "steps and waits per peer") == 2 * 2);  // title and heading
    CHECK(count(html, "<rect class=\"span\"") >= 2 * 4 * 2);
    CHECK(count(html, "<title>step (") > 0);
    CHECK(count(html, "<title>wait for peer ") > 0);
    CHECK(count(html, "<svg") == count(html, "</svg>"));
    CHECK(count(html, "class=\"series\"") == 6);
    CHECK(count(html, "class=\"bar\"") == 8);
    CHECK(count(html, "class=\"node\"") == 4);
    // Bytes: every cell of 4 x 4 per algorithm. Staleness and weights: the 8 edges of the ring
    // (each peer hears 2 neighbours) per algorithm and map, the other 8 cells "no edge".
    CHECK(count(html, "class=\"cell\"") == 2 * 16 + 2 * 2 * 8);
    CHECK(count(html, "class=\"cell none\"") == 2 * 2 * 8);
    CHECK(count(html, "dpsgd: mean staleness per edge (rounds)") == 2);  // title and heading
    CHECK(count(html, "sgp: mixing weight per edge") == 2);
    // Ring weights are uniform: 1/3 for each neighbour, under both protocols.
    CHECK(count(html, "1 to 0: 0.333 weight") == 2);
    CHECK(count(html, "class=\"trace\" href=\"trace-dpsgd-seed0.json\"") == 1);
}

TEST_CASE("the report of a launch run draws the recorded topology and links the timelines") {
    LaunchJob job;
    const auto out = job.dir.path() / "launch";
    auto r = run(kBin + " launch --inproc --no-plots --topology " + job.topology + " --config " +
                 job.config + " --cluster " + job.cluster + " --algorithms dpsgd --out " +
                 out.string() + " --trace " + (out / "trace.json").string() + " --timeout 60");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    r = run(kBin + " report " + out.string() + " --out " + (job.dir.path() / "page.html").string() +
            " --json");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("\"kind\": \"launch\"") != std::string::npos);
    const auto html = slurp(job.dir.path() / "page.html");
    check_self_contained(html);
    CHECK(count(html, "<tr><td>dpsgd</td>") == 1);
    CHECK(count(html, "class=\"node\"") == 4);  // the topology launch recorded
    CHECK(count(html, "class=\"bar\"") == 4);
    CHECK(count(html, "class=\"trace\"") == 5);  // the merged one, one per peer
    CHECK(count(html, "class=\"trace\" href=\"launch/trace.json\"") == 1);
    CHECK(count(html, "class=\"cell\"") == 16 + 2 * 8);  // bytes; staleness and weights
    CHECK(count(html, "class=\"cell none\"") == 2 * 8);
    CHECK(count(html, "dpsgd: mean staleness per edge (rounds)") == 2);  // title and heading
    // The peers' own timelines drawn as one: a row per peer, steps and waits.
    CHECK(count(html, "dpsgd: steps and waits per peer") == 2);  // title and heading
    CHECK(count(html, "<title>step (") > 0);
}

TEST_CASE("the report of a language model shows bits per character, and a loss target") {
    LaunchJob job;
    // A sim run folder as gossamer sim writes it for text data: evaluation lines with "bpc".
    const auto sim = job.dir.path() / "text-sim";
    fs::create_directories(sim / "dpsgd" / "seed0");
    std::ofstream(sim / "dpsgd" / "seed0" / "metrics.jsonl")
        << R"({"time": 0, "accuracy": 0.05, "loss": 4.2, "bpc": 6.0593, "bytes": 0})"
        << "\n"
        << R"({"time": 1, "accuracy": 0.3, "loss": 2.0794, "bpc": 3.0, "bytes": 4000000})"
        << "\n";
    std::ofstream(sim / "dpsgd" / "seed0" / "peers.jsonl") << R"({"rank": 0, "idle_share": 0.1})"
                                                           << "\n";
    auto r = run(kBin + " report " + sim.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    auto html = slurp(sim / "report.html");
    check_self_contained(html);
    CHECK(count(html, "<th>final bits per character</th><th>loss [nats/char]</th>") == 1);
    CHECK(count(html, "<td>3.0000</td>") == 1);  // the last line's bpc
    CHECK(count(html, "Bits per character of the average model") >= 1);
    CHECK(count(html, "Bits per character against bytes") >= 1);
    CHECK(count(html, "accuracy [%]") == 0);
    // A launch result with a loss target and text rows.
    const auto launch = job.dir.path() / "text-launch";
    fs::create_directories(launch / "dpsgd");
    std::ofstream(launch / "result.json") << R"({"n": 1, "transport": "inproc",
        "target_loss": 1.5, "algorithms": [{"algorithm": "dpsgd", "time_to_target": 2.5,
        "train_seconds": 3, "final_accuracy": 0.4, "final_loss": 1.3863, "final_bpc": 2.0,
        "mb_sent_per_peer": 1, "idle_share": 0.1, "failed_peers": 0}]})";
    std::ofstream(launch / "dpsgd" / "peer0.jsonl")
        << R"({"rank": 0, "eval": 0, "time": 0, "at": 0, "accuracy": 0.1, "loss": 2.0794, "bpc": 3.0})"
        << "\n";
    r = run(kBin + " report " + launch.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    html = slurp(launch / "report.html");
    CHECK(count(html, "<th>time to loss &le; 1.5 [s]</th>") == 1);
    CHECK(count(html, "<td>2.0000</td>") == 1);  // final_bpc
    CHECK(count(html, "Mean bits per character of the peers' own models") >= 1);
}

TEST_CASE("report refuses what is not a run folder with one line and exit 2") {
    LaunchJob job;
    auto r = run(kBin + " report " + (job.dir.path() / "missing").string());
    CHECK(r.status == 2);
    CHECK(r.err.find("not a folder") != std::string::npos);
    fs::create_directories(job.dir.path() / "empty");
    r = run(kBin + " report " + (job.dir.path() / "empty").string());
    CHECK(r.status == 2);
    CHECK(r.err.find("not a run folder") != std::string::npos);
    CHECK(!fs::exists(job.dir.path() / "empty" / "report.html"));
    r = run(kBin + " report");
    CHECK(r.status == 2);
}
