#pragma once
// Writes small IDX files for the reader tests, gzipped with zlib or plain.

#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gossamer::test {

/// The bytes of a uint8 IDX file (type 0x08) with `dims`, followed by `values`.
inline std::vector<unsigned char> idx_bytes(const std::vector<std::uint32_t>& dims,
                                            const std::vector<unsigned char>& values,
                                            unsigned char type = 0x08) {
    std::vector<unsigned char> out = {0, 0, type, static_cast<unsigned char>(dims.size())};
    for (auto d : dims)
        for (int shift = 24; shift >= 0; shift -= 8)
            out.push_back(static_cast<unsigned char>((d >> shift) & 0xFF));
    out.insert(out.end(), values.begin(), values.end());
    return out;
}

inline void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    if (!bytes.empty())
        REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                static_cast<int>(bytes.size()));
    REQUIRE(gzclose(f) == Z_OK);
}

inline void write_plain(const std::string& path, const std::vector<unsigned char>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

}  // namespace gossamer::test
