// Prints each regex set of the pre-tokenizer table (src/tokenizer/pretokenize_table.cpp) as
// "SET <id>" followed by one regex per line in hex (regexes may contain CR/LF), for ref_split. kimi-k2's set (han) is printed as the
// single regex "\p{Han}+", the text by which llama.cpp selects its built-in Kimi-K2 splitter.
#include <cstdio>
#include <set>
#include <string>

#include "tokenizer/pretokenize.h"

static void hex(const char* s) {
    for (; *s; ++s) std::printf("%02x", static_cast<unsigned char>(*s));
    std::printf("\n");
}

int main() {
    std::set<std::string> seen;
    for (const auto& row : moe::tokenizer::detail::pre_table()) {
        if (!seen.insert(row.set->id).second) continue;
        std::printf("SET %s\n", row.set->id);
        if (row.set->han) {
            hex("\\p{Han}+");
            continue;
        }
        for (const char* re : row.set->regexes) hex(re);
    }
    return 0;
}
