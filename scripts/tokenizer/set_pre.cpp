// Writes a copy of a vocab GGUF with tokenizer.ggml.pre set to another name (metadata only; a
// vocab file has no tensors). Used by gen-vectors.sh to give llama.cpp a vocab for pre-tokenizers
// whose real vocab file is not available. Not part of the engine.
//   set_pre IN.gguf PRE OUT.gguf
#include <cstdio>
#include <exception>

#include "format/gguf.h"
#include "format/gguf_writer.h"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s IN.gguf PRE OUT.gguf\n", argv[0]);
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
