// Nothing of a job is left behind: after stop(), after SIGKILL of its owner (the holder
// cleans), after SIGKILL of the holder itself (then `gossamer lab clean`), after Ctrl-C and
// after `gossamer lab down`.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "lab_support.hpp"
#include "support/run.hpp"

namespace lab = gossamer::lab;
using namespace gossamer::test;

namespace {

const std::string kGossamer = GOSSAMER_BINARY;

bool job_gone(int slot) {
    return lab::job_netns(slot).empty() && !host_has_links(slot);
}

// Starts `gossamer lab up --peers 2` and returns its slot once it holds the lab.
int start_up(Child& up) {
    const auto line = up.line_with("lab gsm", 30);
    INFO("lab up printed: " << up.seen());
    REQUIRE(!line.empty());
    const int slot = slot_of_up_line(line);
    REQUIRE(slot >= 0);
    REQUIRE(!up.line_with("holding", 10).empty());
    REQUIRE(lab::job_netns(slot).size() == 3);  // the lab's and two peers'
    return slot;
}

// Whether slot `slot`'s lock is held by someone (a live holder), tried as the next job would.
bool slot_locked(int slot) {
    const std::string path = std::string(lab::kStateDir) + "/" + lab::job_name(slot) + ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    ::close(fd);  // releases it if this call took it
    return held;
}

pid_t holder_pid_of(const std::string& seen) {
    const auto at = seen.find("holder pid ");
    return at == std::string::npos ? -1 : std::stoi(seen.substr(at + 11));
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("cleanup: a live lab's slot stays locked, so no other job takes and tears it down") {
        if (!have_netns()) return;
        // `gossamer lab up` opens its lock as fd 3 and its pipe as fds 4 and 5: the holder
        // once moved the pipe onto 3 and lost the lock, and another job then removed this lab.
        // Descriptors 3 to 9 closed first, as in a shell: the lab's own files take 3, 4, 5.
        Child up({"/bin/sh", "-c",
                  "exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; exec '" + kGossamer +
                      "' lab up --peers 2 --rate 100mbit --for 60"});
        const int slot = start_up(up);
        CHECK(slot_locked(slot));
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 0}};
        auto other = lab::Lab::create(s);  // the next job: another slot, this lab untouched
        CHECK(other.slot() != slot);
        CHECK(slot_locked(other.slot()));
        CHECK(lab::job_netns(slot).size() == 3);
        other.stop();
        ::kill(up.pid(), SIGINT);
        CHECK(eventually([&] { return !slot_locked(slot) && job_gone(slot); }, 15));
    }

    TEST_CASE("cleanup: a stopped lab leaves no namespace, veth or qdisc of its job") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{100e6, 100e6}, {0, 0}, {0, 0}};
        s.links = {{0, 1, 10e6}};
        auto l = lab::Lab::create(s);
        const int slot = l.slot();
        const pid_t holder = l.holder_pid();
        CHECK(lab::job_netns(slot).size() == 4);
        CHECK_FALSE(host_has_links(slot));  // every link lives inside the job's namespaces
        l.stop();
        CHECK(job_gone(slot));
        CHECK(::kill(holder, 0) != 0);  // the holder has ended (and was reaped)
    }

    TEST_CASE("cleanup: SIGKILL of the owner: the holder removes the job") {
        if (!have_netns()) return;
        Child up({kGossamer, "lab", "up", "--peers", "2", "--rate", "100mbit", "--for", "60"});
        const int slot = start_up(up);
        ::kill(up.pid(), SIGKILL);
        CHECK(up.wait(10) == -1);  // killed, not exited
        CHECK(eventually([&] { return job_gone(slot); }, 15));
    }

    TEST_CASE("cleanup: SIGKILL of the holder leaves the job to 'gossamer lab clean'") {
        if (!have_netns()) return;
        Child up({kGossamer, "lab", "up", "--peers", "2", "--for", "60"});
        const int slot = start_up(up);
        const pid_t holder = holder_pid_of(up.seen());
        REQUIRE(holder > 0);
        ::kill(holder, SIGKILL);
        CHECK(up.wait(10) == 0);  // it notices its holder died and ends
        CHECK(up.line_with("removed", 1).find("its holder ended") != std::string::npos);
        CHECK(lab::job_netns(slot).size() == 3);  // nobody removed them
        const auto r = run(kGossamer + " lab clean");
        CHECK(r.status == 0);
        CHECK(r.out.find("removed " + lab::peer_netns(slot, 0)) != std::string::npos);
        CHECK(r.out.find("removed " + lab::lab_netns(slot)) != std::string::npos);
        CHECK(job_gone(slot));
    }

    TEST_CASE("cleanup: 'gossamer lab clean' leaves a lab whose holder lives alone") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 0}};
        auto l = lab::Lab::create(s);
        const auto r = run(kGossamer + " lab clean");
        CHECK(r.status == 0);
        CHECK(r.out.find("left " + l.job() + " alone") != std::string::npos);
        CHECK(lab::job_netns(l.slot()).size() == 3);
        const int slot = l.slot();
        l.stop();
        CHECK(job_gone(slot));
    }

    TEST_CASE("cleanup: Ctrl-C of 'gossamer lab up' removes the job") {
        if (!have_netns()) return;
        Child up({kGossamer, "lab", "up", "--peers", "2", "--for", "60"});
        const int slot = start_up(up);
        ::kill(up.pid(), SIGINT);
        CHECK(up.wait(15) == 0);
        CHECK(job_gone(slot));
    }

    TEST_CASE("cleanup: 'gossamer lab down JOB' ends a lab held by another process") {
        if (!have_netns()) return;
        Child up({kGossamer, "lab", "up", "--peers", "2", "--for", "60"});
        const int slot = start_up(up);
        const auto r = run(kGossamer + " lab down " + lab::job_name(slot));
        CHECK(r.status == 0);
        CHECK(r.out.find("removed " + lab::peer_netns(slot, 1)) != std::string::npos);
        CHECK(job_gone(slot));
        CHECK(up.wait(10) == 0);
    }

    TEST_CASE("cleanup: two labs at once get different /24s") {
        if (!have_netns()) return;
        lab::LabSpec s;
        s.peers = {{0, 0}, {0, 0}};
        auto a = lab::Lab::create(s);
        auto b = lab::Lab::create(s);
        CHECK(a.slot() != b.slot());
        CHECK(a.hosts()[0].address != b.hosts()[0].address);
        const int sa = a.slot(), sb = b.slot();
        a.stop();
        b.stop();
        CHECK(job_gone(sa));
        CHECK(job_gone(sb));
    }
}
