// Shared by the fuzz targets: the fixture folder and the two test vocabularies.
#include <cstring>
#include <string>

#include "format/gguf.h"
#include "fuzz/fuzz_target.h"
#include "tokenizer/tokenizer.h"

namespace moe::fuzz {
namespace {
tokenizer::Tokenizer load(const char* file) {
    return tokenizer::Tokenizer::from_gguf(gguf::File::open(std::string(data_dir()) + "/vocab/" + file));
}
}  // namespace

const char* data_dir() { return MOE_FUZZ_DATA_DIR; }

const tokenizer::Tokenizer& vocab_tokenizer(const char* file) {
    // Loaded once on first use (thread-safe static init), immutable afterwards.
    static const tokenizer::Tokenizer bpe = load(kVocabBpe);
    static const tokenizer::Tokenizer spm = load(kVocabSpm);
    if (std::strcmp(file, kVocabBpe) == 0) return bpe;
    MOE_ASSERT(std::strcmp(file, kVocabSpm) == 0, "unknown fuzz vocabulary ", file);
    return spm;
}

void prepare(const char* name) {
    for (const char* t : {"tokenizer_bpe", "tokenizer_spm", "detokenizer", "http_request"})
        if (std::strcmp(name, t) == 0) (void)vocab_tokenizer(kVocabBpe);  // loads both vocabularies
}

}  // namespace moe::fuzz
