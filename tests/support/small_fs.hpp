#pragma once
// A small, nearly full file system for the full-disk tests: a tmpfs mounted in a private mount
// namespace (`unshare -m`, root), seen only by the command run in it. Optional component
// `tmpfs` (docs/operations/testing.md): where it cannot be mounted, the test skips.

#include <cstdlib>
#include <fstream>
#include <string>

#include "support/run.hpp"
#include "support/temp_dir.hpp"

namespace gossamer::test {

/// Empty when a tmpfs can be mounted in a private mount namespace here, else why not.
inline std::string missing_small_fs() {
    if (std::system("command -v unshare >/dev/null 2>&1") != 0)
        return "unshare is not on PATH (util-linux)";
    TempDir dir;
    const std::string probe = "unshare -m sh -c 'mount -t tmpfs -o size=16k tmpfs " +
                              dir.path().string() + "' >/dev/null 2>&1";
    if (std::system(probe.c_str()) != 0)
        return "cannot mount a tmpfs in a private mount namespace (unshare -m; needs root)";
    return {};
}

/// Runs `script` (sh) with $FS a fresh tmpfs of `kib` KiB that a file of `fill_kib` KiB
/// (FS/fill) already takes, in a private mount namespace. `dir` holds the mount point and the
/// script.
inline RunResult run_on_small_fs(const TempDir& dir, int kib, int fill_kib,
                                 const std::string& script) {
    const auto fs = dir.path() / "fs";
    std::filesystem::create_directories(fs);
    const auto file = dir.write("script.sh", "FS=" + fs.string() + "\nhead -c " +
                                                 std::to_string(fill_kib * 1024) +
                                                 " /dev/zero > \"$FS/fill\"\n" + script + "\n");
    return run("unshare -m sh -c 'mount -t tmpfs -o size=" + std::to_string(kib) + "k tmpfs " +
               fs.string() + " && exec sh " + file + "'");
}

}  // namespace gossamer::test
