// The placement-file reader (src/dist/placement.h: Placement::parse = load without the file) and
// its validation against a small model: 2 layers x 4 experts on 2 ranks. Input: the file's text.
// Properties: a file is accepted only if it validates; what was accepted survives to_json() ->
// parse() unchanged; check_model passes for its own shape and for the small model exactly when
// the shapes match; pick() returns a rank that holds the expert, for a few keys per expert.
#include <string>

#include "dist/placement.h"
#include "fuzz/fuzz_target.h"

namespace moe::fuzz {

void placement(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    expect_clean([&] {
        const dist::Placement p = dist::Placement::parse(text, "<fuzz>");
        p.validate("<fuzz>");  // parse() must not return what validate() refuses
        const dist::Placement q = dist::Placement::parse(p.to_json(), "<fuzz:round-trip>");
        MOE_FUZZ_CHECK(q.n_ranks == p.n_ranks && q.n_layers == p.n_layers && q.n_experts == p.n_experts &&
                           q.algorithm == p.algorithm && q.layers.size() == p.layers.size(),
                       "to_json round trip changed the header");
        for (size_t l = 0; l < p.layers.size(); ++l)
            for (size_t e = 0; e < p.layers[l].size(); ++e) {
                const auto &a = p.layers[l][e], &b = q.layers[l][e];
                MOE_FUZZ_CHECK(a.size() == b.size(), "round trip changed the replicas of ", l, "/", e);
                for (size_t i = 0; i < a.size(); ++i)
                    MOE_FUZZ_CHECK(a[i].rank == b[i].rank && a[i].share == b[i].share, "round trip changed a replica");
                for (uint64_t key : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(1) << 41}) {
                    const int r = p.pick(static_cast<int>(l), static_cast<int>(e), key);
                    MOE_FUZZ_CHECK(r >= 0 && r < p.n_ranks && p.holds(static_cast<int>(l), static_cast<int>(e), r),
                                   "pick() chose rank ", r, " which does not hold ", l, "/", e);
                }
            }
        p.check_model(p.n_layers, p.n_experts, p.n_ranks, "<fuzz>");
        const bool small = p.n_layers == 2 && p.n_experts == 4 && p.n_ranks == 2;
        bool ok = true;
        try {
            p.check_model(2, 4, 2, "<fuzz>");
        } catch (const moe::Error&) {
            ok = false;
        }
        MOE_FUZZ_CHECK(ok == small, "check_model(2, 4, 2) ", ok ? "accepted" : "refused", " a ", p.n_layers, "x",
                       p.n_experts, " placement on ", p.n_ranks, " ranks");
        if (small)
            for (int l = 0; l < 2; ++l) {
                int64_t held = 0;
                for (int r = 0; r < 2; ++r) held += p.experts_on(l, r);
                MOE_FUZZ_CHECK(held >= 4, "layer ", l, ": ", held, " experts held over the ranks");
            }
    });
}

}  // namespace moe::fuzz
