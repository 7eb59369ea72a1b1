// Model file identity for the EP start-up check (dist/file_digest.h): the full digest equals an
// independent one-shot XXH3 of (size, bytes) and sees a one-byte change anywhere, also past the
// first 8 MiB where the quick digest is blind; errors name the file.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "core/error.h"
#include "core/rng.h"
#include "dist/file_digest.h"

using namespace moe;

namespace {

std::string write_file(const std::string& name, const std::vector<char>& bytes) {
    const std::string path = (moe::testutil::binary_temp_dir("digest") / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
}

TEST(FileDigest, FullSeesEveryByteQuickOnlyTheHead) {
    const size_t n = (20u << 20) + 12345;  // not a multiple of the 4 MiB read block
    std::vector<char> bytes(n);
    Rng rng(7);
    for (auto& b : bytes) b = static_cast<char>(rng.next());
    const std::string a = write_file("a.bin", bytes);
    const dist::FileDigest full = dist::file_digest(a, dist::DigestMode::Full);
    EXPECT_EQ(full.size, n);
    EXPECT_EQ(full.hashed, n);
    // independent: one XXH3 call over (size as uint64, bytes)
    std::vector<char> cat(8 + n);
    const uint64_t size = n;
    std::memcpy(cat.data(), &size, 8);
    std::memcpy(cat.data() + 8, bytes.data(), n);
    EXPECT_EQ(full.hash, XXH3_64bits(cat.data(), cat.size()));
    const dist::FileDigest quick = dist::file_digest(a, dist::DigestMode::Quick);
    EXPECT_EQ(quick.hashed, 8u << 20);
    EXPECT_NE(quick.hash, full.hash);

    for (size_t at : {size_t{100}, size_t{15} << 20, n - 1}) {
        std::vector<char> changed = bytes;
        changed[at] ^= 0x10;
        const std::string b = write_file("b.bin", changed);
        EXPECT_NE(dist::file_digest(b, dist::DigestMode::Full).hash, full.hash) << "byte " << at;
        // the quick digest only sees the first 8 MiB (documented limitation)
        EXPECT_EQ(dist::file_digest(b, dist::DigestMode::Quick).hash == quick.hash, at >= (8u << 20)) << at;
    }
    bytes.push_back(0);  // one byte longer
    EXPECT_NE(dist::file_digest(write_file("c.bin", bytes), dist::DigestMode::Full).hash, full.hash);
    EXPECT_EQ(dist::file_digest(a, dist::DigestMode::Full).hash, full.hash);  // stable
}

TEST(FileDigest, Errors) {
    try {
        dist::file_digest("/nonexistent/model.gguf", dist::DigestMode::Full);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[ep] cannot open /nonexistent/model.gguf"), std::string::npos) << e.what();
    }
    EXPECT_THROW(dist::parse_digest_mode("fast"), Error);
    EXPECT_EQ(dist::parse_digest_mode("quick"), dist::DigestMode::Quick);
}

}  // namespace
