// gossamer peer, after its inputs are checked: join over UCX, train with the Driver, the exact
// average of the survivors' models, the files. Every way out is one line on stderr prefixed
// with the rank, and an exit status (gossamer/peer/job.hpp).
#include "gossamer/peer/job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/core/ranks_text.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/peer/average.hpp"
#include "gossamer/peer/checkpoints.hpp"
#include "gossamer/peer/evaluator.hpp"
#include "gossamer/peer/guard.hpp"
#include "gossamer/peer/join.hpp"

namespace gossamer::peer {
namespace {

void say(int rank, std::string_view line) {
    std::fprintf(stderr, "[rank %d] %.*s\n", rank, static_cast<int>(line.size()), line.data());
    std::fflush(stderr);
}

// Refusals that mean this peer's own inputs do not fit the job (exit 2); the others (nobody
// answered, peers missing, rank 0 gone) are a start-up that stopped (exit 1).
bool refused_for_input(bootstrap::Reason r) {
    using R = bootstrap::Reason;
    switch (r) {
        case R::unreachable:
        case R::missing_peers:
        case R::connection_lost:
            return false;
        default:
            return true;
    }
}

// " (why each was lost)": the bootstrap's line where it saw the process go (it watched the
// process's own connection), else the transport's.
std::string loss_causes(JoinedPeer& me, const std::vector<int>& lost) {
    if (lost.empty()) return "";
    const auto losses = me.losses();
    std::string out;
    for (int q : lost) {
        std::string cause = me.transport().peer_status(q).reason;
        for (const auto& l : losses)
            if (l.rank == q && !l.left) cause = l.reason;
        if (cause.empty()) cause = fmt::format("peer {}", q);
        out += fmt::format("{}{}", out.empty() ? " (" : "; ", cause);
    }
    return out + ")";
}

JoinOptions join_options(const PeerJob& job, const PartitionLayout& layout,
                         std::uint64_t model_size) {
    JoinOptions o;
    auto& b = o.bootstrap;
    b.rank = job.rank;
    for (const auto& p : job.topology.peers) b.peers.push_back({p.host, p.port});
    b.job_id = job.job_id;
    b.token = job.token;
    b.model_size = model_size;
    b.layout = layout;
    b.settings = job.settings;
    b.join_timeout = job.join_timeout;
    const auto& host = b.peers[static_cast<std::size_t>(job.rank)].host;
    o.ucx.local_peers = static_cast<int>(std::count_if(
        b.peers.begin(), b.peers.end(), [&](const auto& e) { return e.host == host; }));
    // Peers that share this machine's cores under other addresses (the network-namespace lab,
    // docs/operations/lab.md): its launcher says how many, so that UCX blocks instead of spinning.
    if (const char* local = std::getenv("GOSSAMER_LOCAL_PEERS")) {
        const int count = std::atoi(local);
        if (count >= 1) o.ucx.local_peers = count;
    }
    // How large payloads travel (docs/modules/transport.md, "Eager and rendezvous"): the transport
    // reads GOSSAMER_UCX_LARGE itself; a bad value is bad input, refused here rather than as a
    // transport failure.
    if (const char* large = std::getenv("GOSSAMER_UCX_LARGE");
        large && *large && !transport::parse_large_messages(large))
        throw ConfigError("", "GOSSAMER_UCX_LARGE",
                          fmt::format("\"{}\" is not a way to send large messages", large),
                          "set it to automatic, rendezvous or eager, or unset it");
    o.ucx.default_timeout = send_timeout(model_size);
    return o;
}

// Under "outer" (docs/algorithms/outer.md): "steps" counts rounds, so a record that has it says
// both counts, "inner_steps" (this peer's worker's) and "rounds" (its outer rounds). Records of
// jobs without "outer" are unchanged.
void add_outer_counts(json::Json& rec, const PeerJob& job) {
    if (!job.worker.outer) return;
    rec["inner_steps"] = job.worker.outer->inner_steps();
    rec["rounds"] = job.worker.outer->steps();
}

// The lowest surviving rank evaluates the average and writes average.json and model.bin;
// returns what average.json holds.
json::Json write_average(const PeerJob& job, Model& model, const PartitionLayout& layout,
                         const AverageResult& avg, const std::vector<int>& survivors,
                         const std::vector<int>& lost, std::int64_t steps) {
    // A survivor that sent its own non-finite model (it checks none: not a gossamer peer, or a
    // fault) makes the average one: no result (docs/operations/reliability.md, "Non-finite
    // values").
    if (const auto k = first_non_finite(avg.model))
        throw Diverged(fmt::format(
            "the average of ranks {} holds {} at element {}: a member's model was not finite; no "
            "result written",
            ranks_text(survivors), non_finite_name(avg.model[*k]), *k));
    const EvalResult e = model.evaluate(avg.model, job.data.test, job.config.eval_batch);
    if (!std::isfinite(e.loss))
        throw Diverged(
            fmt::format("the average of ranks {} has a test loss of {}; no result written",
                        ranks_text(survivors), e.loss));
    json::Json rec = {{"algorithm", job.algorithm},
                      {"survivors", survivors},
                      {"lost", lost},
                      {"loss", e.loss},
                      {"accuracy", e.accuracy ? json::Json(*e.accuracy) : json::Json(nullptr)},
                      {"total_mass", avg.total_mass},
                      {"steps", steps},
                      {"job_id", job.job_id}};
    add_outer_counts(rec, job);
    const bool text = text_metrics::is_text(job.data.test);
    if (text) rec["bpc"] = text_metrics::bits_per_char(e.loss);
    save_model_file((job.out / "model.bin").string(), model.describe(), steps, layout, avg.model);
    const auto path = job.out / "average.json";
    write_file_atomically(path.string(), rec.dump(2) + "\n", "average");
    const std::string after_loss =
        text         ? fmt::format(" nats/char, {:.4f} bpc", text_metrics::bits_per_char(e.loss))
        : e.accuracy ? fmt::format(", accuracy {:.4f}", *e.accuracy)
                     : "";
    say(job.rank, fmt::format("average of ranks {}: test loss {:.6f}{}; wrote {}",
                              ranks_text(survivors), e.loss, after_loss, path.string()));
    return rec;
}

}  // namespace

namespace {
std::atomic<bool>& leave_flag() {
    static std::atomic<bool> flag{false};
    return flag;
}
}  // namespace

void request_leave() noexcept {
    leave_flag().store(true, std::memory_order_relaxed);
}

void leave_on_sigterm() {
    struct sigaction sa {};
    sa.sa_handler = [](int) { request_leave(); };
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // the second SIGTERM: the default action
    ::sigaction(SIGTERM, &sa, nullptr);
}

// A job whose result is written is over: a --join to it is refused before it tries (the
// coordinator it would ask is gone, or about to be). OUT/average.json names the job's id.
static std::optional<std::string> finished_job(const PeerJob& job) {
    const auto path = job.out / "average.json";
    std::ifstream in(path);
    if (!in) return std::nullopt;
    const auto avg = json::Json::parse(in, nullptr, false);
    if (avg.is_discarded() || !avg.contains("job_id") || !avg["job_id"].is_number_unsigned() ||
        avg["job_id"].get<std::uint64_t>() != job.job_id)
        return std::nullopt;
    return fmt::format(
        "--join: job {} is over: its result is written ({}, survivors {}); a finished job "
        "takes no peers; start a new job (another --job-id or --out) instead",
        job.job_id, path.string(), avg.value("survivors", json::Json::array()).dump());
}

int run_peer_job(PeerJob& job) {
    const int rank = job.rank, n = job.topology.n();
    if (job.join_running)
        if (const auto why = finished_job(job)) {
            say(rank, *why);
            return 2;
        }
    const auto model = optim::build_model(job.config, job.data.train);
    const auto layout = optim::build_partitions(job.config, *model);
    const std::size_t size = model->parameter_count();
    std::unique_ptr<JoinedPeer> me;
    auto jo = join_options(job, layout, size);
    jo.running = job.join_running;
    jo.bootstrap.min_peers = job.min_peers;
    jo.bootstrap.late = job.late_ranks;
    const bootstrap::Options joined_with = jo.bootstrap;
    try {
        me = join(std::move(jo));
    } catch (const bootstrap::BootstrapError& e) {
        // A failed rendezvous was logged by the bootstrap already (one line naming this rank and
        // the reason); only the listener's own failures are not.
        using R = bootstrap::Reason;
        if (e.reason() == R::address_in_use || e.reason() == R::cannot_listen ||
            e.reason() == R::bad_rank)
            say(rank, fmt::format("could not join: {}", e.what()));
        return refused_for_input(e.reason()) ? 2 : 1;
    } catch (const TransportError& e) {
        say(rank, fmt::format("could not join: {}", e.what()));
        return 1;
    }
    // Ranks outside the view it started in or entered are absent for its protocol (a job
    // started without them, --min-peers; or lost before it joined: docs/operations/elastic.md).
    // The driver options assemble_peer_job filled, with what joining decided and the hooks of
    // the joined job.
    auto d = job.driver;
    for (const auto& l : me->losses()) d.absent.push_back(l.rank);
    if (job.join_running) {
        d.enter = job.protocol->resumed_at() > 0 ? proto::Entry::rejoin : proto::Entry::fresh;
        // A sponsor answers at its next step boundary with one model transfer; a peer that
        // finished training answers nothing (docs/operations/elastic.md, "Entering as the job
        // ends").
        d.entry_timeout =
            2 * std::chrono::duration_cast<std::chrono::milliseconds>(send_timeout(size));
        say(rank,
            fmt::format("entered the running job of {} peers ({}, {}; view {})", n, job.algorithm,
                        d.enter == proto::Entry::rejoin
                            ? fmt::format("its model from step {}", job.protocol->resumed_at())
                            : std::string("a sponsor's model"),
                        me->bootstrap().agreed_view().number));
    } else {
        say(rank,
            fmt::format("joined {} peers ({}, {} steps)", n, job.algorithm, job.worker.steps));
    }

    // Stops on an error leave like a crash (no goodbye), so no other peer waits on this one.
    auto stop = [&](const std::string& line) {
        say(rank, line);
        me->abandon();
        return 1;
    };
    // The membership rules (docs/modules/peer.md, "Membership"): a peer rank 0 declared lost, or
    // one paused past its loss that cannot confirm it is still a member, leaves without a result.
    MembershipGuard guard(*me, joined_with);
    guard.say = [rank](const std::string& line) { say(rank, line); };
    auto poll = [&] { guard.check(); };
    // Leaves without a result, as a crash would (the others have moved on without this peer).
    auto no_result = [&](const std::string& line) {
        say(rank, line);
        me->abandon();
        return kNoResult;
    };
    std::vector<transport::Message> early;  // the average's messages that came while training
    d.poll = poll;
    d.leave_requested = [] { return leave_flag().load(std::memory_order_relaxed); };
    d.clock_offset = me->bootstrap().clock_offset();
    d.intercept = [&](transport::Message& m) {
        if (!is_average_message(m)) return false;
        early.push_back(std::move(m));
        return true;
    };
    bool first_cut_said = false;
    if (job.checkpoint)  // the protocol's consistent cuts (docs/operations/checkpoint.md)
        d.on_snapshot = [&](proto::Snapshot&& s) {
            CheckpointHeader h = *job.checkpoint;
            h.step = s.step;
            save_checkpoint_file(checkpoint_path(job.out, rank, s.step).string(), h, s.state);
            // An entering peer writes from its first cut that all its live edges take part in
            // (docs/operations/elastic.md, "Checkpoints").
            if (job.join_running && !first_cut_said)
                say(rank, fmt::format("first checkpoint since it entered: step {}", s.step));
            first_cut_said = true;
        };
    auto last_line = std::chrono::steady_clock::now();
    std::vector<float> x(size);
    // Evaluation points: `model` is the evaluator's until finish(), then the average's.
    std::optional<PeerEvaluator> eval;
    if (job.eval_samples > 0)
        eval.emplace(*model, first_samples(job.data.test, job.eval_samples), job.config.eval_batch,
                     rank, job.eval_interval, [t = &me->transport()] { t->wake(); });
    if (eval) d.extra_metrics = [&] { return eval->take(); };
    d.on_step = [&](const StepRecord& s) {
        // Evaluation ticks on the job's clock (--job-start): a peer that entered late evaluates
        // at the job's ticks, so the launcher's time to target lines up every process's points.
        if (eval)
            eval->at_step(s.job_time, [&](std::vector<float>& into) {
                into.resize(size);
                job.protocol->current_model(into);
            });
        // Before step_finished reaches the protocol: its model holds s.step finished updates.
        if (job.checkpoint_every > 0 && s.step > 0 && s.step % job.checkpoint_every == 0) {
            job.protocol->current_model(x);
            save_model_file((job.out / fmt::format("checkpoint-{}-{}.bin", rank, s.step)).string(),
                            model->describe(), s.step, layout, x);
        }
        const auto now = std::chrono::steady_clock::now();
        if (now - last_line < std::chrono::seconds(3)) return;
        last_line = now;
        say(rank, fmt::format("{}: step {}/{}, loss {:.4f}, {:.1f} s", job.algorithm, s.step + 1,
                              job.worker.steps, s.loss, s.time));
    };
    DriverResult r;
    const std::int64_t resumed = job.protocol->resumed_at();  // steps taken before a resume
    try {
        Driver driver(*job.protocol, job.worker.protocol_worker(), me->transport(), d);
        guard.restart();
        r = driver.run();
    } catch (const NotMember& e) {
        return no_result(e.what());
    } catch (const EntryTimeout& e) {
        // Never admitted, it holds no state: the others must not wait for it in their exact
        // average. It goes as a crash does (no goodbye), so every member declares it lost at
        // once and averages without it; a goodbye would say it finished.
        say(rank,
            fmt::format("could not enter the running job: {}; exiting without a result", e.what()));
        std::_Exit(1);
    } catch (const Diverged& e) {
        // Its own loss or model is NaN or infinite: it leaves as a crash does (no goodbye), so
        // the members count it lost at once and average without it; it writes no result.
        say(rank, e.what());
        append_metrics_lines(
            job.driver.metrics_path,
            {json::Json{{"rank", rank}, {"event", "diverged"}, {"reason", e.what()}}});
        std::_Exit(kDiverged);
    } catch (const std::exception& e) {  // PeerFailure says "peer R failed: ..."
        return stop(fmt::format("stopped: {}", e.what()));
    }
    // Steps of the job done: a peer that entered it counts from the job's step it entered at.
    const std::int64_t steps_done =
        job.join_running && !r.step_log.empty() ? r.step_log.back().step + 1 : resumed + r.steps;
    if (r.failed) {
        // On the job's clock where the launcher gave one (DriverOptions::job_start).
        const double at =
            d.job_start
                ? std::chrono::duration<double>(std::chrono::system_clock::now() - *d.job_start)
                      .count()
                : r.end_time;
        say(rank, fmt::format("emulated failure at {:.2f} s{} (cluster file): exiting at once", at,
                              d.job_start ? " of the job" : ""));
        std::_Exit(kEmulatedFailure);  // as a crash: no goodbye, no average
    }
    if (eval) append_metrics_lines(job.driver.metrics_path, eval->finish());
    if (r.left) {
        // Its mass went to its neighbours; the goodbye (~JoinedPeer) tells the job it left.
        say(rank, fmt::format("left the job gracefully after {} steps ({:.1f} s), its model and "
                              "mass handed to its neighbours: no result from this peer",
                              steps_done, r.end_time));
        return 0;
    }

    // The survivors: every rank neither this transport nor the bootstrap has lost. A survivor
    // lost during the average stops it; then it starts again over the others (at most n times:
    // each attempt has fewer peers), with the chunks that came for other survivor sets.
    std::vector<int> survivors, lost;
    auto lost_from_survivors = [&] {
        lost.clear();
        for (int q = 0; q < n; ++q)
            if (!std::binary_search(survivors.begin(), survivors.end(), q)) lost.push_back(q);
    };
    auto take_views = [&] {
        survivors = guard.survivors();
        lost_from_survivors();
    };
    // The majority rule: only a strict majority of the job's last agreed view writes a result,
    // so two sides of a split (or a peer cut off and resumed) can never both write one.
    auto minority_line = [&] {
        auto line = guard.minority(survivors);  // may refresh survivors while a view installs
        lost_from_survivors();
        return line;
    };
    job.protocol->current_model(x);
    AverageOptions ao;
    ao.timeout = job.average_timeout;
    ao.poll = poll;
    ao.vanished = [&](int q) {
        const auto v = me->vanished();
        return std::find(v.begin(), v.end(), q) != v.end();
    };
    AverageResult avg;
    guard.restart();  // evaluation and the model copy above do not tick
    try {
        poll();
    } catch (const NotMember& e) {
        return no_result(e.what());
    }
    take_views();
    for (;;) {
        if (auto line = minority_line()) return no_result(*line);
        try {
            avg = exact_average(me->transport(), survivors, x, job.protocol->mass(), early, ao);
            break;
        } catch (const NotMember& e) {
            return no_result(e.what());
        } catch (const PeerFailure& e) {
            const auto before = survivors;
            take_views();
            if (survivors == before)
                return stop(fmt::format("stopped in the final average: {}", e.what()));
            say(rank,
                fmt::format("{}; averaging again over ranks {}", e.what(), ranks_text(survivors)));
        } catch (const std::exception& e) {
            return stop(fmt::format("stopped in the final average: {}", e.what()));
        }
    }
    // Messages a lost peer still sent (it had not learnt yet that the job carried on without
    // it) were dropped by the transport, never applied.
    const auto from_lost = me->transport().drops()[transport::DropReason::not_member];
    say(rank,
        fmt::format("finished {} in {:.1f} s; lost peers: {}{}{}",
                    job.worker.outer ? fmt::format("{} rounds ({} inner steps)", steps_done,
                                                   job.worker.outer->inner_steps())
                                     : fmt::format("{} steps", steps_done),
                    r.end_time, ranks_text(lost), loss_causes(*me, lost),
                    from_lost ? fmt::format("; dropped {} messages from lost peers", from_lost)
                              : std::string()));
    json::Json summary = {{"rank", rank},           {"algorithm", job.algorithm},
                          {"steps", steps_done},    {"end_time", r.end_time},
                          {"survivors", survivors}, {"lost", lost}};
    add_outer_counts(summary, job);
    if (survivors.front() == rank) try {
            summary["average"] =
                write_average(job, *model, layout, avg, survivors, lost, steps_done);
        } catch (const Diverged& e) {
            say(rank, e.what());
            return kDiverged;
        }
    if (job.json) std::printf("%s\n", summary.dump().c_str());
    return 0;
}

}  // namespace gossamer::peer
