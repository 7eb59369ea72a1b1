// `moe bench-moe`: the MoE block alone (route, dispatch, grouped expert FFN, combine) over shapes
// (T, E, k, D, F) with random expert weights (f32, or --type f16/bf16/q8_0/q4_0/q4_k/q5_k/q6_k:
// quantized from the same random f32 values with the reference quantizers), printed as llama-bench-style rows: time and tokens/s
// (mean ± sd over repetitions), the stage split, achieved GFLOP/s and GB/s of expert-weight traffic.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <time.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"
#include "moe/moe_block.h"
#include "tools/lib/commands.h"

namespace moe::tools {

namespace {

struct Shape {
    std::string name;
    int64_t T;
    int E, k;
    int64_t D, F;
};

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe bench-moe [-t N] [-r N] [--shape T,E,k,D,F ...] [--type T] [--kernel] [-o md|json]\n"
                 "  Times one MoE block (f32 expert weights, softmax top-k router with renorm) on random\n"
                 "  data. Default shapes: decode T=1 and T=8 and prefill T=512 at the OLMoE-1B-7B\n"
                 "  (E=64 k=8 D=2048 F=1024), Qwen3-30B-A3B (E=128 k=8 D=2048 F=768) and\n"
                 "  Mixtral-8x7B (E=8 k=2 D=4096 F=14336; 5.6 GB of f32 weights, prefill at T=128)\n"
                 "  layer shapes; about 1-2 minutes on 2 cores. Set MOE_FORCE_ISA=scalar|avx2|avx512 to\n"
                 "  pick the kernel path. The cpu column is the CPU time the process got over wall time x\n"
                 "  threads: under 100%% when other processes shared the cores or pool threads sat idle.\n"
                 "  -t N              threads (default: hardware concurrency)\n"
                 "  -r N              timed repetitions per shape (default 3; one untimed warm-up)\n"
                 "  --shape T,E,k,D,F a shape to run instead of the defaults (repeatable)\n"
                 "  --type T          expert weight type: f32 (default), f16, bf16, q8_0, q4_0, q4_k, q5_k,\n"
                 "                    q6_k (D and F must be multiples of the type's block: 32, or 256 for\n"
                 "                    the K-quants); the router stays f32. With --kernel also any other\n"
                 "                    weight type with a matmul kernel (q2_K, q3_K, iq4_xs, iq2_xxs, ...:\n"
                 "                    random valid blocks where there is no quantizer here)\n"
                 "  --kernel          instead of the block: the matmul kernel of --type alone, one thread,\n"
                 "                    thread CPU time (immune to time-sharing), on 16 expert matrices of\n"
                 "                    each shape's F x D (more than L2; fewer if over 512 MB), 64-column\n"
                 "                    calls as the grouped FFN makes them, m = 1 (decode GEMV) and m = 32\n"
                 "                    (one prefill row tile)\n"
                 "  --attention T,H,Hkv,D  instead of the block: the attention kernel alone, one thread,\n"
                 "                    thread CPU time: causal prefill of T tokens and one decode step at\n"
                 "                    position T-1, f32 and f16 KV (e.g. 512,16,16,128 for OLMoE)\n"
                 "  -o md|json        output format (default md)\n");
}

const char* value_of(int argc, char** argv, int& i) {
    if (i + 1 >= argc) throw_error("bench-moe", "option ", argv[i], " needs a value (see moe bench-moe --help)");
    return argv[++i];
}

long long parse_int(const char* s, const char* what, long long lo, long long hi) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || v < lo || v > hi)
        throw_error("bench-moe", what, " '", s, "' must be an integer in [", lo, ", ", hi, "]");
    return v;
}

Shape parse_shape(const std::string& s) {
    std::vector<long long> v;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t end = std::min(s.find(',', pos), s.size());
        v.push_back(parse_int(s.substr(pos, end - pos).c_str(), "--shape value", 1, 1 << 20));
        pos = end + 1;
    }
    if (v.size() != 5) throw_error("bench-moe", "--shape '", s, "' must be T,E,k,D,F (5 integers)");
    if (v[2] > v[1]) throw_error("bench-moe", "--shape '", s, "': k must be <= E");
    return {"custom", v[0], static_cast<int>(v[1]), static_cast<int>(v[2]), v[3], v[4]};
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            const size_t c = line.find(':');
            return c == std::string::npos ? line : line.substr(c + 2);
        }
    return "unknown CPU";
}

// Random weights of one layer shape, filled in parallel (deterministic per chunk).
struct Layer {
    MoeSpec spec;
    std::unique_ptr<float[]> router, gate, up, down;
    std::unique_ptr<uint8_t[]> gate_q, up_q, down_q;  // expert weights in --type (not f32)
    MoeWeights w;
};

// rows x K f32 values -> rows of type t (reference quantizer), in parallel over rows.
std::unique_ptr<uint8_t[]> convert(ThreadPool& pool, const float* src, int64_t rows, int64_t K, DType t) {
    const uint64_t rb = row_bytes(t, static_cast<uint64_t>(K), "bench-moe");
    std::unique_ptr<uint8_t[]> out(new uint8_t[rb * static_cast<uint64_t>(rows)]);
    pool.parallel_for(rows, 64, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) ref::quantize_row(t, src + r * K, out.get() + static_cast<uint64_t>(r) * rb, K);
    });
    return out;
}

void fill(ThreadPool& pool, float* p, size_t n, float sd, uint64_t seed) {
    constexpr size_t kChunk = size_t(1) << 20;
    const size_t chunks = (n + kChunk - 1) / kChunk;
    pool.parallel_for(static_cast<int64_t>(chunks), 1, [&](int64_t b, int64_t e, int) {
        for (int64_t c = b; c < e; ++c) {
            Rng rng(seed * 1000003 + static_cast<uint64_t>(c));
            const size_t lo = static_cast<size_t>(c) * kChunk, hi = std::min(n, lo + kChunk);
            for (size_t i = lo; i < hi; ++i) p[i] = rng.uniform(-sd, sd);
        }
    });
}

std::unique_ptr<Layer> make_layer(ThreadPool& pool, const Shape& s, DType type) {
    auto L = std::make_unique<Layer>();
    MoeSpec& sp = L->spec;
    sp.n_embd = s.D;
    sp.n_ff = s.F;
    sp.n_expert = s.E;
    sp.top_k = s.k;
    sp.norm_topk = true;
    sp.validate();
    const size_t D = static_cast<size_t>(s.D), F = static_cast<size_t>(s.F), E = static_cast<size_t>(s.E);
    L->router.reset(new float[D * E]);
    L->gate.reset(new float[D * F * E]);
    L->up.reset(new float[D * F * E]);
    L->down.reset(new float[D * F * E]);
    const float sd_d = static_cast<float>(std::sqrt(3.0 / static_cast<double>(D)));
    fill(pool, L->router.get(), D * E, sd_d, 1);
    fill(pool, L->gate.get(), D * F * E, sd_d, 2);
    fill(pool, L->up.get(), D * F * E, sd_d, 3);
    fill(pool, L->down.get(), D * F * E, static_cast<float>(std::sqrt(3.0 / static_cast<double>(F))), 4);
    MoeWeights& w = L->w;
    w.layer = 0;
    w.router = make_view("blk.0.ffn_gate_inp.weight", DType::F32, {s.D, s.E}, L->router.get());
    w.gate_exps = make_view("blk.0.ffn_gate_exps.weight", DType::F32, {s.D, s.F, s.E}, L->gate.get());
    w.up_exps = make_view("blk.0.ffn_up_exps.weight", DType::F32, {s.D, s.F, s.E}, L->up.get());
    w.down_exps = make_view("blk.0.ffn_down_exps.weight", DType::F32, {s.F, s.D, s.E}, L->down.get());
    if (type != DType::F32) {
        L->gate_q = convert(pool, L->gate.get(), s.F * s.E, s.D, type);
        L->gate.reset();
        L->up_q = convert(pool, L->up.get(), s.F * s.E, s.D, type);
        L->up.reset();
        L->down_q = convert(pool, L->down.get(), s.D * s.E, s.F, type);
        L->down.reset();
        w.gate_exps = make_view("blk.0.ffn_gate_exps.weight", type, {s.D, s.F, s.E}, L->gate_q.get());
        w.up_exps = make_view("blk.0.ffn_up_exps.weight", type, {s.D, s.F, s.E}, L->up_q.get());
        w.down_exps = make_view("blk.0.ffn_down_exps.weight", type, {s.F, s.D, s.E}, L->down_q.get());
    }
    return L;
}

struct Row {
    Shape s;
    int threads;
    std::string isa;
    double ms_mean, ms_sd, tps_mean, tps_sd;
    StageTimes stages;  // summed over the timed repetitions
    double gflops, gbps;
    int64_t active_experts;
    double cpu_share;  // process CPU time / (wall time x threads) over the timed reps
    std::string type;  // expert weight type
};

double process_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
}
double sd(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
}

Row bench_shape(ThreadPool& pool, const kernels::CpuKernels& kern, const Layer& L, const Shape& s, int reps) {
    MoeBlock block(L.spec, L.w, kern, s.T, pool.size());
    std::vector<float> x(static_cast<size_t>(s.T * s.D)), y(x.size());
    Rng rng(7);
    for (auto& v : x) v = rng.normal();
    block.forward(pool, x.data(), s.T, y.data());  // warm-up
    std::vector<double> ms, tps;
    StageTimes st;
    const double cpu0 = process_cpu_seconds();
    Timer wall;
    for (int r = 0; r < reps; ++r) {
        Timer t;
        block.forward(pool, x.data(), s.T, y.data(), {&st});
        const double sec = t.seconds();
        ms.push_back(sec * 1e3);
        tps.push_back(static_cast<double>(s.T) / sec);
    }
    const double cpu_share = (process_cpu_seconds() - cpu0) / (wall.seconds() * pool.size());
    int64_t active = 0;
    for (int e = 0; e < s.E; ++e) active += block.last_plan().counts[e] > 0;
    const double D = static_cast<double>(s.D), F = static_cast<double>(s.F);
    const double flops = 2.0 * static_cast<double>(s.T) * D * s.E + 6.0 * static_cast<double>(s.T * s.k) * D * F;
    const double bpw = dtype_bits_per_weight(L.w.gate_exps.type) / 8.0;  // bytes per expert weight
    const double bytes = static_cast<double>(active) * 3.0 * D * F * bpw + D * s.E * 4.0;
    const double sec = mean(ms) / 1e3;
    return {s, pool.size(), kernels::isa_name(kern.isa()), mean(ms), sd(ms), mean(tps), sd(tps), st,
            flops / sec / 1e9, bytes / sec / 1e9, active, cpu_share, dtype_name(L.w.gate_exps.type)};
}

void print_md_header() {
    std::printf("| model shape | T | E | k | D | F | threads | isa | ms/iter | tokens/s | route | dispatch | experts | combine | GFLOP/s | GB/s (weights) | cpu | weights |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
}

void print_md(const Row& r) {
    const double tot = r.stages.total() > 0 ? r.stages.total() : 1;
    std::printf("| %s | %lld | %d | %d | %lld | %lld | %d | %s | %.3f ± %.3f | %.1f ± %.1f | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f | %.1f | %.0f%% | %s |\n",
                r.s.name.c_str(), static_cast<long long>(r.s.T), r.s.E, r.s.k, static_cast<long long>(r.s.D),
                static_cast<long long>(r.s.F), r.threads, r.isa.c_str(), r.ms_mean, r.ms_sd, r.tps_mean, r.tps_sd,
                100 * r.stages.route / tot, 100 * r.stages.dispatch / tot, 100 * r.stages.experts / tot,
                100 * r.stages.combine / tot, r.gflops, r.gbps, 100 * r.cpu_share, r.type.c_str());
    std::fflush(stdout);
}

void print_json(const Row& r, bool first) {
    const double n = r.stages.calls > 0 ? static_cast<double>(r.stages.calls) : 1;
    std::printf("%s  {\"shape\": \"%s\", \"T\": %lld, \"E\": %d, \"k\": %d, \"D\": %lld, \"F\": %lld, \"threads\": %d, "
                "\"isa\": \"%s\", \"ms_mean\": %.6f, \"ms_sd\": %.6f, \"tokens_per_s_mean\": %.3f, \"tokens_per_s_sd\": %.3f, "
                "\"stage_ms\": {\"route\": %.6f, \"dispatch\": %.6f, \"experts\": %.6f, \"combine\": %.6f, \"shared\": %.6f}, "
                "\"gflops\": %.3f, \"weight_gbps\": %.3f, \"active_experts\": %lld, \"cpu_share\": %.3f, \"type\": \"%s\"}",
                first ? "" : ",\n", r.s.name.c_str(), static_cast<long long>(r.s.T), r.s.E, r.s.k,
                static_cast<long long>(r.s.D), static_cast<long long>(r.s.F), r.threads, r.isa.c_str(), r.ms_mean,
                r.ms_sd, r.tps_mean, r.tps_sd, 1e3 * r.stages.route / n, 1e3 * r.stages.dispatch / n,
                1e3 * r.stages.experts / n, 1e3 * r.stages.combine / n, 1e3 * r.stages.shared / n, r.gflops, r.gbps,
                static_cast<long long>(r.active_experts), r.cpu_share, r.type.c_str());
    std::fflush(stdout);
}

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// --kernel: the matmul kernel alone on 16 random F x D weight matrices of `type`.
void bench_kernel(const kernels::CpuKernels& kern, const Shape& s, DType type, int reps) {
    const int64_t N = s.F, K = s.D;
    const uint64_t rb = row_bytes(type, static_cast<uint64_t>(K), "bench-moe");
    // 16 matrices (more than any L2), fewer when that would pass 512 MB (Mixtral's F x D)
    const int64_t NE = std::max<int64_t>(1, std::min<int64_t>(16, (int64_t{512} << 20) / static_cast<int64_t>(rb * N)));
    std::vector<uint8_t> w(rb * static_cast<uint64_t>(N * NE));
    std::vector<float> row(static_cast<size_t>(K));
    Rng rng(11);
    for (int64_t r = 0; r < N * NE; ++r) {
        uint8_t* out = w.data() + static_cast<uint64_t>(r) * rb;
        if (!ref::can_quantize(type)) {  // no quantizer (Q2_K, Q3_K, the IQ family): random valid blocks
            ref::fill_random_blocks(type, rng, out, K / dtype_info(type).block, 1.0f);
            continue;
        }
        for (auto& v : row) v = rng.uniform(-1.0f, 1.0f);
        ref::quantize_row(type, row.data(), out, K);
    }
    const kernels::MatmulKernel& k = kern.matmul(type, "expert");
    for (int64_t m : {int64_t{1}, int64_t{32}}) {
        std::vector<float> x(static_cast<size_t>(m * K)), y(static_cast<size_t>(m * 64));
        for (auto& v : x) v = rng.normal();
        double best = 1e30;
        for (int rep = 0; rep < reps + 1; ++rep) {
            const double t0 = thread_cpu_seconds();
            for (int64_t e = 0; e < NE; ++e)
                for (int64_t n0 = 0; n0 < N; n0 += 64) {
                    kernels::MatmulArgs a;
                    a.w = w.data() + static_cast<uint64_t>(e * N) * rb;
                    a.w_row_stride = rb;
                    a.x = x.data();
                    a.ldx = K;
                    a.y = y.data();
                    a.ldy = 64;
                    a.m = m;
                    a.K = K;
                    a.n0 = n0;
                    a.n1 = std::min(N, n0 + 64);
                    k(a);
                }
            best = std::min(best, thread_cpu_seconds() - t0);
        }
        const double bytes = static_cast<double>(rb) * static_cast<double>(N * NE);
        const double flops = 2.0 * static_cast<double>(m * K) * static_cast<double>(N * NE);
        std::printf("| %s | %s | %lld x %lld | %lld | %.3f | %.2f | %.1f |\n", dtype_name(type), k.name,
                    static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(m), best * 1e3 / NE,
                    bytes / best / 1e9, flops / best / 1e9);
        std::fflush(stdout);
    }
}

// --attention: the attention kernel alone, one thread (thread CPU time): causal prefill of T tokens
// (positions 0..T-1) and one decode step at position T-1, H query heads over Hkv kv heads of
// head_dim D, f32 and f16 KV cache. GFLOP/s counts 2 (dk + dv) flops per (query head, key) pair.
void bench_attention(const std::string& spec_s, kernels::Isa isa, int reps) {
    std::vector<long long> v;
    for (size_t b = 0; b <= spec_s.size();) {
        const size_t e = std::min(spec_s.find(',', b), spec_s.size());
        v.push_back(parse_int(spec_s.substr(b, e - b).c_str(), "--attention", 1, 1 << 20));
        b = e + 1;
    }
    if (v.size() != 4 || v[1] % v[2] != 0) throw_error("bench-moe", "--attention '", spec_s, "' must be T,H,Hkv,D with Hkv | H");
    const int64_t T = v[0], H = v[1], Hkv = v[2], D = v[3];
    std::printf("| kv | case | T | heads (q/kv) | head_dim | ms | GFLOP/s |\n|---|---|---:|---|---:|---:|---:|\n");
    for (DType kv : {DType::F32, DType::F16}) {
        AttentionSpec sp;
        sp.n_head = H;
        sp.n_head_kv = Hkv;
        sp.head_dim_k = sp.head_dim_v = D;
        sp.kv_type = kv;
        Rng rng(7);
        std::vector<float> q(static_cast<size_t>(T * H * D)), out(q.size());
        std::vector<float> kf(static_cast<size_t>(T * Hkv * D)), vf(kf.size());
        for (auto& x : q) x = rng.normal();
        for (auto& x : kf) x = rng.normal();
        for (auto& x : vf) x = rng.normal();
        std::vector<uint16_t> kh(kf.size()), vh(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) kh[i] = fp32_to_fp16(kf[i]), vh[i] = fp32_to_fp16(vf[i]);
        std::vector<int32_t> pos(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
        for (int dec = 0; dec < 2; ++dec) {
            AttentionArgs a;
            a.k = kv == DType::F16 ? static_cast<const void*>(kh.data()) : kf.data();
            a.v = kv == DType::F16 ? static_cast<const void*>(vh.data()) : vf.data();
            a.n_kv = T;
            a.q = dec ? q.data() + (T - 1) * H * D : q.data();
            a.pos = dec ? pos.data() + (T - 1) : pos.data();
            a.n_tokens = dec ? 1 : T;
            a.out = out.data();
            const int n = dec ? 64 * reps : reps;
            double best = 1e30;
            for (int rep = 0; rep < n + 1; ++rep) {
                const double t0 = thread_cpu_seconds();
                cpu::attention(sp, a, nullptr, isa);
                best = std::min(best, thread_cpu_seconds() - t0);
            }
            const double pairs = dec ? static_cast<double>(T) : static_cast<double>(T) * static_cast<double>(T + 1) / 2;
            const double flops = 2.0 * 2.0 * static_cast<double>(D) * static_cast<double>(H) * pairs;
            std::printf("| %s | %s | %lld | %lld/%lld | %lld | %.3f | %.1f |\n", dtype_name(kv), dec ? "decode" : "prefill",
                        static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(Hkv),
                        static_cast<long long>(D), best * 1e3, flops / best / 1e9);
            std::fflush(stdout);
        }
    }
}

}  // namespace

int cmd_bench_moe(int argc, char** argv) {
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int reps = 3;
    bool json = false, kernel_only = false;
    std::string attention_spec;
    DType type = DType::F32;
    std::vector<Shape> shapes;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "-t") {
            threads = static_cast<int>(parse_int(value_of(argc, argv, i), "-t", 1, 1024));
        } else if (a == "-r") {
            reps = static_cast<int>(parse_int(value_of(argc, argv, i), "-r", 1, 100000));
        } else if (a == "--shape") {
            shapes.push_back(parse_shape(value_of(argc, argv, i)));
        } else if (a == "--type") {
            const std::string t = value_of(argc, argv, i);
            const auto d = dtype_from_name(t);
            if (!d || !kernels::CpuKernels(kernels::Isa::Scalar).has_matmul(*d))
                throw_error("bench-moe", "--type '", t, "' must be one of f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k",
                            " (with --kernel: any weight type with a matmul kernel, e.g. q2_K, iq4_xs)");
            type = *d;
        } else if (a == "--kernel") {
            kernel_only = true;
        } else if (a == "--attention") {
            attention_spec = value_of(argc, argv, i);
        } else if (a == "-o") {
            const std::string o = value_of(argc, argv, i);
            if (o != "md" && o != "json") throw_error("bench-moe", "-o '", o, "' must be md or json");
            json = o == "json";
        } else {
            throw_error("bench-moe", "unknown option '", a, "' (see moe bench-moe --help)");
        }
    }
    if (shapes.empty()) {
        for (int64_t T : {1, 8, 512}) shapes.push_back({"OLMoE-1B-7B", T, 64, 8, 2048, 1024});
        for (int64_t T : {1, 8, 512}) shapes.push_back({"Qwen3-30B-A3B", T, 128, 8, 2048, 768});
        for (int64_t T : {1, 8, 128}) shapes.push_back({"Mixtral-8x7B", T, 8, 2, 4096, 14336});
    }
    if (!kernel_only && !ref::can_quantize(type))
        throw_error("bench-moe", "--type ", dtype_name(type), " has no quantizer here: use it with --kernel (random blocks)");
    const uint32_t blk = dtype_info(type).block;
    for (const Shape& s : shapes)
        if (s.D % blk || s.F % blk)
            throw_error("bench-moe", "--type ", dtype_name(type), " needs D and F to be multiples of ", blk, " (shape D=",
                        s.D, " F=", s.F, ")");
    const kernels::CpuKernels kern = kernels::CpuKernels::from_env();
    if (!attention_spec.empty()) {
        std::printf("moe bench-moe --attention: %s, build %s, isa %s, 1 thread (thread CPU time), best of %d (+1)\n\n",
                    cpu_model().c_str(), MOE_BUILD_FLAGS, kernels::isa_name(kern.isa()), reps);
        bench_attention(attention_spec, kern.isa(), reps);
        return 0;
    }
    if (kernel_only) {
        std::printf("moe bench-moe --kernel: %s, build %s, 1 thread (thread CPU time), best of %d (+1), %s weights\n\n",
                    cpu_model().c_str(), MOE_BUILD_FLAGS, reps, dtype_name(type));
        std::printf("| weights | kernel | matrix (N x K) | m | ms/matrix | GB/s (weights) | GFLOP/s |\n");
        std::printf("|---|---|---|---:|---:|---:|---:|\n");
        for (size_t i = 0; i < shapes.size(); ++i) {  // each distinct (D, F) once
            bool seen = false;
            for (size_t j = 0; j < i; ++j) seen = seen || (shapes[j].D == shapes[i].D && shapes[j].F == shapes[i].F);
            if (!seen) bench_kernel(kern, shapes[i], type, reps);
        }
        return 0;
    }
    ThreadPool pool(threads);
    if (json) std::printf("{\"build\": \"%s\", \"cpu\": \"%s\", \"rows\": [\n", MOE_BUILD_FLAGS, cpu_model().c_str());
    else {
        std::printf("moe bench-moe: %s, build %s, %d threads, isa %s (kernel %s), %d reps (+1 warm-up), %s expert weights\n\n",
                    cpu_model().c_str(), MOE_BUILD_FLAGS, threads, kernels::isa_name(kern.isa()),
                    kern.matmul(type, "experts").name, reps, dtype_name(type));
        print_md_header();
    }
    // Shapes with the same (E, k-independent) weights share one allocation, built when first needed.
    std::unique_ptr<Layer> layer;
    Shape layer_shape{"", 0, 0, 0, 0, 0};
    bool first = true;
    for (const Shape& s : shapes) {
        if (!layer || layer_shape.E != s.E || layer_shape.D != s.D || layer_shape.F != s.F) {
            layer.reset();
            const double gb = 3.0 * static_cast<double>(s.D) * static_cast<double>(s.F) * s.E * 4 / 1e9;
            std::fprintf(stderr, "bench-moe: allocating %.2f GB of f32 expert weights for E=%d D=%lld F=%lld%s\n", gb, s.E,
                         static_cast<long long>(s.D), static_cast<long long>(s.F),
                         type == DType::F32 ? "" : " (then converted)");
            layer = make_layer(pool, s, type);
            layer_shape = s;
        }
        Layer& L = *layer;
        L.spec.top_k = s.k;
        const Row r = bench_shape(pool, kern, L, s, reps);
        if (json) print_json(r, first);
        else print_md(r);
        first = false;
    }
    if (json) std::printf("\n]}\n");
    return 0;
}

}  // namespace moe::tools
