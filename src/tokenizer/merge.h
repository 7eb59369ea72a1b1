#pragma once
// Merge loop of the SPM tokenizer (internal to src/tokenizer; BPE has an id-based loop in bpe.cpp).
//
// The text is first cut into symbols (byte ranges, in order). Every adjacent pair that the model
// can merge becomes a candidate with a priority (lower is better: BPE merge rank, or minus the SPM
// token score; a float, as scores are). The best candidate is merged (ties: the leftmost pair), the two new neighbour pairs
// become candidates, and this repeats until no candidate is left. Candidates made stale by an
// earlier merge are recognised and skipped when they come up. O(n log n) in the number of symbols,
// so long inputs without spaces stay fast.
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace moe::tokenizer::detail {

struct Symbol {
    uint32_t start = 0;  // byte offset into the text
    uint32_t len = 0;    // 0 once merged into its left neighbour
    int32_t prev = -1;
    int32_t next = -1;
};

// Merges symbols of `text` in place. `priority(left, right)` returns the pair's priority, or
// nullopt when the pair cannot merge. Returns the surviving symbols in text order.
// The candidate heap holds up to one entry per character of a long text, so entries are kept
// at 16 bytes: the loop is bound by cache misses of the heap's sift operations.
template <typename PriorityFn>
std::vector<Symbol> merge_symbols(std::string_view text, std::vector<Symbol> sym, PriorityFn&& priority) {
    struct Cand {
        float prio;
        int32_t left, right;
        uint32_t len;  // combined length when queued; a mismatch later means the pair is stale
    };
    struct Worse {
        bool operator()(const Cand& a, const Cand& b) const {
            return a.prio > b.prio || (a.prio == b.prio && a.left > b.left);
        }
    };
    std::priority_queue<Cand, std::vector<Cand>, Worse> queue;
    auto view = [&](int32_t i) { return text.substr(sym[i].start, sym[i].len); };
    auto try_add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        std::optional<float> p = priority(view(l), view(r));
        if (p) queue.push(Cand{*p, l, r, sym[l].len + sym[r].len});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
        const Cand c = queue.top();
        queue.pop();
        Symbol& l = sym[c.left];
        Symbol& r = sym[c.right];
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;  // stale
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = c.left;
        try_add(l.prev, c.left);
        try_add(c.left, l.next);
    }
    std::vector<Symbol> out;
    for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(sym[i]);
    return out;
}

}  // namespace moe::tokenizer::detail
