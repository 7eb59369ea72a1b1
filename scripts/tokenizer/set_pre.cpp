// Writes a copy of a vocab GGUF with tokenizer.ggml.pre set to another name (metadata only; a
// vocab file has no tensors), optionally with tokens appended (TEXT:TYPE, type as in
// tokenizer.ggml.token_type). Used by gen-vectors.sh to give llama.cpp a vocab for pre-tokenizers
// whose real vocab file is not available. Not part of the engine.
//   set_pre IN.gguf PRE OUT.gguf [TEXT:TYPE ...]
#include <cstdio>
#include <exception>
#include <string>

#include "format/gguf.h"
#include "format/gguf_writer.h"

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s IN.gguf PRE OUT.gguf [TEXT:TYPE ...]\n", argv[0]);
        return 2;
    }
    try {
        const auto in = moe::gguf::File::open(argv[1]);
        if (!in.tensors().empty()) {
            std::fprintf(stderr, "%s has tensors; give a vocab-only GGUF\n", argv[1]);
            return 1;
        }
        moe::gguf::Writer w(argv[3]);
        bool seen = false;
        for (const auto& kv : in.metadata()) {
            if (kv.key == "tokenizer.ggml.pre") {
                w.set_string(kv.key, argv[2]);
                seen = true;
            } else if (argc > 4 && (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type" ||
                                    kv.key == "tokenizer.ggml.scores")) {
                moe::gguf::Value v = kv.value;
                for (int i = 4; i < argc; ++i) {
                    const std::string arg = argv[i];
                    const size_t colon = arg.rfind(':');
                    moe::gguf::Value e;
                    e.type = v.elem_type;
                    if (kv.key == "tokenizer.ggml.tokens") e.str = arg.substr(0, colon);
                    else if (kv.key == "tokenizer.ggml.token_type") e.i = std::stoi(arg.substr(colon + 1)), e.u = e.i;
                    v.arr.push_back(e);
                }
                w.set(kv.key, v);
            } else {
                w.set(kv.key, kv.value);
            }
        }
        if (!seen) w.set_string("tokenizer.ggml.pre", argv[2]);
        w.write_header();
        w.finish();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
