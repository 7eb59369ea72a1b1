// The request-body layer of `moe serve` (server/api.h) called directly: the edges the http_request
// fuzz target covers, with their exact outcome. Uses the gpt-2 vocab-only GGUF of tests/data.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "server/api.h"
#include "tokenizer/tokenizer.h"

using namespace moe;
using namespace moe::server;
using nlohmann::json;

namespace {

const tokenizer::Tokenizer& tok() {
    static const tokenizer::Tokenizer t =
        tokenizer::Tokenizer::from_gguf(gguf::File::open(MOE_TEST_DATA_DIR "/vocab/ggml-vocab-gpt-2.gguf"));
    return t;
}

ApiError refusal(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted";
    return {};
}

TEST(Api, IntegerFieldsAtTheInt64Edge) {
    ChatTemplate chat;
    const ParseContext ctx{&tok(), "m", 64, &chat};
    EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"hi","seed":9223372036854775807})"), ctx).gen.sampler.seed,
              uint64_t(9223372036854775807));
    EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"hi","seed":-12})"), ctx).gen.sampler.seed, uint64_t(-12));
    EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"hi","max_tokens":3.0})"), ctx).gen.max_tokens, 3);
    // 2^63 as a float passed the double range check and was converted (undefined behaviour); as an
    // unsigned integer it wrapped to -2^63. Both are out of range now.
    for (const char* body : {R"({"prompt":"hi","seed":9223372036854775808.0})", R"({"prompt":"hi","seed":9223372036854775808})",
                             R"({"prompt":"hi","seed":-1e300})", R"({"prompt":"hi","top_k":18446744073709551615})"}) {
        const ApiError e = refusal([&] { parse_completion(parse_body(body), ctx); });
        EXPECT_EQ(e.status, 400) << body;
        EXPECT_NE(e.message.find("must be in ["), std::string::npos) << body << ": " << e.message;
    }
}

TEST(Api, TokenizeAndDetokenizeBodies) {
    const TokenizeRequest t = parse_tokenize(parse_body(R"({"content":"Hello","add_special":true})"));
    EXPECT_EQ(t.content, "Hello");
    EXPECT_TRUE(t.add_special);
    EXPECT_FALSE(parse_tokenize(parse_body(R"({"content":""})")).add_special);
    EXPECT_EQ(refusal([] { parse_tokenize(parse_body(R"({"content":1})")); }).param, "content");
    EXPECT_EQ(refusal([] { parse_tokenize(parse_body(R"({"content":"x","add_special":1})")); }).param, "add_special");

    const auto ids = parse_detokenize(parse_body(R"({"tokens":[15496,0,50256]})"), tok());
    EXPECT_EQ(ids, (std::vector<int32_t>{15496, 0, 50256}));
    for (const char* body : {R"({"tokens":[50257]})", R"({"tokens":[-1]})", R"({"tokens":[18446744073709551615]})",
                             R"({"tokens":[4294967296]})", R"({"tokens":[1.0]})", R"({"tokens":"1"})", R"({})"}) {
        const ApiError e = refusal([&] { parse_detokenize(parse_body(body), tok()); });
        EXPECT_EQ(e.status, 400) << body;
        EXPECT_EQ(e.param, "tokens") << body;
    }
}

}  // namespace
