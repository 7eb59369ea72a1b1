// `moe bench`: prompt-processing and generation speed, printed as llama-bench-style rows so the two
// tools' tables can be put side by side, plus what llama-bench does not print:
//  - pp N: N random tokens evaluated as one sequence from an empty cache in batches of --batch
//    (llama-bench: n_batch/n_ubatch 2048/512; here one batch of up to 512 rows);
//  - tg N: N tokens decoded one at a time from an empty cache (as llama-bench's tg test);
//  - -d D (llama-bench's -d): both tests run after D tokens of context, "pp N @ dD" / "tg N @ dD".
//    The D random tokens are prefilled once, untimed; every run then truncates the cache back to D
//    rows (llama-bench prefills D tokens once and restores that saved state before each run);
//  - one warm-up run of each test, then -r repetitions; t/s = mean ± sample sd over repetitions;
//  - the stage split of the timed repetitions (ForwardStats: embedding, attention projections,
//    attention, MoE route/dispatch/experts/shared/combine, dense FFN, head);
//  - for tg rows the fraction of the bandwidth ceiling: decode reads every active weight once per
//    token, so ceiling t/s = read bandwidth / active bytes per token (dense tensors + k/E of the
//    routed-expert tensors + the lm head; the token embedding is one row per token). The read
//    bandwidth is measured in a spawned child process (so its buffer does not count in our peak RSS) with
//    the same thread count, or given with --bw;
//  - peak RSS (getrusage) against file + KV cache, load time (open + validate + bind, i.e. the
//    mmap) and the first touch of every weight page.
// `moe bench --membw` only measures the read bandwidth.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "format/gguf.h"
#include "kernels/cpu/isa.h"
#include "model/model.h"
#include "model/param_count.h"
#include "runtime/session.h"
#include "tools/lib/bench_membw.h"
#include "tools/lib/commands.h"
#include "tools/lib/ep_args.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void bench_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe bench -m MODEL [-p N] [-n N] [-d N] [-t THREADS] [-r REPS] [--batch N] [-o md|json]\n"
                 "                 [--kv-type f32|f16|q8_0[,...]] [--swa-full] [--bw GBS]\n"
                 "       moe bench --membw [-m MODEL] [-t THREADS] [--membw-mib MIB] [-r REPS]\n"
                 "  Prints llama-bench-style rows: pp N (prompt tokens/s) and tg N (generated tokens/s),\n"
                 "  mean ± sd over REPS runs after one warm-up, the stage split, the fraction of the\n"
                 "  read-bandwidth ceiling reached in tg, peak RSS and load time.\n"
                 "  -p N          prompt tokens (default 512; 0 = skip)\n"
                 "  -n N          generated tokens (default 128; 0 = skip)\n"
                 "  -d N          context depth: run pp / tg after N cached tokens (default 0)\n"
                 "  -t N          threads (default: all cores)\n"
                 "  -r N          repetitions (default 5)\n"
                 "  --batch N     rows per forward call for pp (default 512)\n"
                 "  -o md|json    output format (default md)\n"
                 "  --kv-type T   KV cache type f32 (default), f16 or q8_0 (approximate); a list (f16,q8_0: up\n"
                 "                to 4) runs one session per type side by side: pp repetitions and tg tokens\n"
                 "                alternate between them, one row per type (\"... kv T\"); not with --mem / --ep\n"
                 "  --swa-full    sliding-window layers keep every position (default: a ring)\n"
                 "  --bw GBS      read bandwidth for the ceiling (default: measured, best of 5, and around each\n"
                 "                tg repetition, best of 3)\n"
                 "  --membw       only measure the read bandwidth with -t threads and print GB/s\n"
                 "  --membw-mib M buffer size for the bandwidth measurement (default: with -m, the model file's\n"
                 "                size within [256, half the free memory] MiB; 1024 for --membw without -m)\n"
                 "%s", kCacheUsage);
    std::fputs(kEpUsage, out);
}

std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (auto& v : t) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(V));
    }
    return t;
}

std::string human_size(double bytes) {
    char b[32];
    if (bytes >= 1024.0 * 1024 * 1024) std::snprintf(b, sizeof b, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else std::snprintf(b, sizeof b, "%.2f MiB", bytes / (1024.0 * 1024));
    return b;
}
std::string human_params(double n) {
    char b[32];
    if (n >= 1e9) std::snprintf(b, sizeof b, "%.2f B", n / 1e9);
    else if (n >= 1e6) std::snprintf(b, sizeof b, "%.2f M", n / 1e6);
    else std::snprintf(b, sizeof b, "%.2f K", n / 1e3);
    return b;
}

// ---------------------------------------------------------------- model facts

// How much of the weights decode streams sit on 2 MiB pages (core/huge_pages.h), and why not.
void print_page_sizes(const model::Model& m) {
    const HugeCoverage f = huge_coverage(m.file().mapping(), m.file().file_size());
    const HugeCoverage a = huge_coverage_anon();
    std::printf("2 MiB pages (THP %s%s): file mapping %s of %s resident; anonymous %s\n", thp_mode().c_str(),
                huge_pages_wanted() ? "" : ", off by MOE_HUGEPAGES=0", human_size(f.huge).c_str(),
                human_size(f.rss).c_str(), human_size(a.huge).c_str());
    if (huge_pages_wanted() && f.known && f.rss > (uint64_t{64} << 20) && f.huge * 2 < f.rss)
        std::printf("  most of the file's cached pages are 4 KiB folios from before this load; they map at 2 MiB once "
                    "they leave the page cache (e.g. echo 1 > /proc/sys/vm/drop_caches) and the file is loaded again\n");
}

// Bytes decode reads per token: every tensor in full, routed experts k/E, token_embd one row (it is
// a lookup), unless it is also the head (tied), then in full.
double active_bytes_per_token(const model::Model& m) {
    const auto tensors = model::describe_gguf(m.file());
    const auto& c = m.config();
    const bool has_output = std::any_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.name == "output.weight"; });
    double b = 0;
    for (const auto& t : tensors) {
        const double bytes = static_cast<double>(t.nbytes());
        if (t.role == model::TensorRole::RoutedExpert)
            b += bytes * static_cast<double>(c.n_expert_used) / static_cast<double>(c.n_expert);
        else if (t.role == model::TensorRole::Embedding && has_output)
            b += bytes / static_cast<double>(t.shape.size() > 1 ? t.shape[1] : 1);
        else
            b += bytes;
    }
    return b;
}

// Reads one byte of every 4 KiB page of every tensor; seconds.
double touch_weights(const model::Model& m) {
    Timer t;
    volatile uint8_t sink = 0;
    uint8_t acc = 0;
    for (const auto& ti : m.file().tensors()) {
        // With --mem the routed experts are read into the cache, never through the mapping.
        if (m.expert_cache() && ti.name.find("_exps.") != std::string::npos) continue;
        const TensorView v = m.file().view(ti);
        const auto* p = static_cast<const uint8_t*>(v.data);
        if (m.released(p)) continue;  // --repack(-experts): panels replaced these blocks (never read)
        for (uint64_t o = 0; o < ti.nbytes; o += 4096) acc ^= p[o];
    }
    sink = acc;
    (void)sink;
    return t.seconds();
}

double peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) * 1024.0;
}

struct Row {
    std::string test;
    double mean = 0, sd = 0;
    model::ForwardStats stats;  // over the timed repetitions
    double ceiling_frac = -1;   // tg: mean t/s / ceiling t/s
    std::vector<double> tps;        // per timed rep
    std::vector<double> bw_around;  // tg: read bandwidth measured before the first and after each rep, GB/s
    std::string cache_summary, cache_json;  // expert cache (--mem) over the timed repetitions
    size_t kv = 0;                          // its session (--kv-type's list index)
};

struct Split {
    const char* name;
    double seconds;
};
std::vector<Split> split_of(const model::ForwardStats& s) {
    const double attn_proj = s.attn_proj - s.attention;  // attn_proj includes the attention kernel
    return {{"embed", s.embed},
            {"attn proj+norm+rope", attn_proj},
            {"attention", s.attention},
            {"moe route", s.moe_stages.route},
            {"moe dispatch", s.moe_stages.dispatch},
            {"moe experts", s.moe_stages.experts},
            {"moe shared", s.moe_stages.shared},
            {"moe combine", s.moe_stages.combine},
            {"moe other", s.moe - s.moe_stages.total()},
            {"dense ffn", s.dense_ffn},
            {"head", s.head},
            {"other", s.total - s.embed - s.attn_proj - s.moe - s.dense_ffn - s.head}};
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    const char* cmd = "bench";
    EpArgs epa;
    std::string model, out_fmt = "md";
    int64_t n_prompt = 512, n_gen = 128, depth = 0, reps = 5, membw_mib = 0;  // 0: footprint_mib with -m, else 1024 (--membw)
    bool membw_only = false;
    double bw_given = 0;
    std::vector<DType> kv_types = {DType::F32};  // --kv-type A,B: one session each, side by side
    bool swa_full = false;
    model::ModelOptions mo = cli_model_options();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            bench_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "-p") {
            n_prompt = parse_int(arg_value(argc, argv, i, cmd), "-p", cmd, 0, 1 << 20);
        } else if (a == "-n") {
            n_gen = parse_int(arg_value(argc, argv, i, cmd), "-n", cmd, 0, 1 << 20);
        } else if (a == "-d" || a == "--depth") {
            depth = parse_int(arg_value(argc, argv, i, cmd), "-d", cmd, 0, 1 << 20);
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "-r" || a == "--repetitions") {
            reps = parse_int(arg_value(argc, argv, i, cmd), "-r", cmd, 1, 1000);
        } else if (a == "--batch" || a == "-b") {
            mo.max_batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 20);
        } else if (a == "-o" || a == "--output") {
            out_fmt = arg_value(argc, argv, i, cmd);
            if (out_fmt != "md" && out_fmt != "json")
                throw_error("bench", "-o '", out_fmt, "' is not one of md, json");
        } else if (parse_cache_option(argc, argv, i, cmd, mo.cache)) {
        } else if (a == "--kv-type") {
            kv_types.clear();
            const std::string list = arg_value(argc, argv, i, cmd);
            for (size_t b = 0; b <= list.size();) {
                const size_t e = std::min(list.find(',', b), list.size());
                kv_types.push_back(parse_kv_type(list.substr(b, e - b), cmd));
                b = e + 1;
            }
            if (kv_types.size() > 4) throw_error("bench", "--kv-type lists ", kv_types.size(), " types; at most 4");
        } else if (a == "--swa-full") {
            swa_full = true;
        } else if (a == "--bw") {
            bw_given = parse_double(arg_value(argc, argv, i, cmd), "--bw", cmd);
            if (!(bw_given > 0)) throw_error("bench", "--bw must be > 0 (GB/s)");
        } else if (a == "--membw") {
            membw_only = true;
        } else if (a == "--membw-mib") {
            membw_mib = parse_int(arg_value(argc, argv, i, cmd), "--membw-mib", cmd, 1, 1 << 20);
        } else if (parse_ep_arg(argc, argv, i, cmd, epa)) {
        } else {
            std::fprintf(stderr, "moe bench: unknown option '%s'\n", a.c_str());
            bench_usage(stderr);
            return 2;
        }
    }
    const int req_threads =
        mo.n_threads > 0 ? mo.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (membw_only) {
        // with -m, the buffer a run of that model samples (footprint_mib), so that scripts comparing
        // against another engine sample what `moe bench -m` would
        if (!model.empty() && !std::filesystem::is_regular_file(model))
            throw_error("bench", "--membw -m ", model, ": no such file (give the model whose size the buffer takes, or --membw-mib)");
        if (membw_mib == 0) membw_mib = model.empty() ? 1024 : footprint_mib(model, 0);
        const double bw = measure_read_bw(req_threads, membw_mib, static_cast<int>(std::max<int64_t>(reps, 3)));
        if (out_fmt == "json")
            std::printf("{\"membw_gbs\": %.2f, \"threads\": %d, \"buffer_mib\": %lld}\n", bw, req_threads,
                        static_cast<long long>(membw_mib));
        else
            std::printf("read bandwidth: %.2f GB/s (%d threads, %lld MiB buffer on %s pages, best of %lld)\n", bw, req_threads,
                        static_cast<long long>(membw_mib), huge_pages_wanted() ? "2 MiB" : "4 KiB",
                        static_cast<long long>(std::max<int64_t>(reps, 3)));
        return 0;
    }
    if (model.empty()) {
        std::fprintf(stderr, "moe bench: need -m MODEL\n");
        bench_usage(stderr);
        return 2;
    }
    // Bandwidth first (child process), before the model's pages compete for the caches.
    const bool membw_default = membw_mib == 0;
    if (membw_default) membw_mib = footprint_mib(model, 0);
    const double bw = bw_given > 0 ? bw_given : measure_read_bw_child(req_threads, membw_mib, 5);

    mo.n_ctx = std::max<int64_t>(depth + n_prompt + n_gen, 16);
    mo.max_batch = std::min(mo.max_batch, std::max<int64_t>({n_prompt, std::min<int64_t>(depth, 512), 1}));
    const DType kv_type = kv_types[0];
    if (kv_types.size() > 1 && (mo.cache.mem_budget > 0 || epa.on))
        throw_error("bench", "--kv-type with several types is not supported with --mem or --ep; give one type");
    mo.cache.kv_type = kv_type;  // --mem: the budget's KV term is the session's cache
    mo.cache.swa_full = swa_full;
    Timer load_timer;
    auto m = model::Model::load(model, mo);
    const double load_s = load_timer.seconds();
    std::unique_ptr<EpRuntime> ep;  // EP: touch nothing up front (each rank touches only its experts)
    if (epa.on) ep = std::make_unique<EpRuntime>(epa, *m, argc, argv, cmd);
    else check_no_ep_options(epa, cmd);
    const double touch_s = ep ? 0.0 : touch_weights(*m);
    const int threads = m->options().n_threads;
    ThreadPool pool(threads);
    // One session per KV type, all on this model and pool: the tests run them side by side (pp
    // repetitions and tg tokens alternate between them), so the VM's drift hits all alike.
    std::vector<std::unique_ptr<runtime::Session>> sessions;
    for (DType t : kv_types) sessions.push_back(std::make_unique<runtime::Session>(*m, pool, runtime::SessionOptions{mo.n_ctx, 1, t, swa_full}));
    const size_t n_sess = sessions.size();
    const int64_t V = m->config().n_vocab;
    std::vector<float> logits(static_cast<size_t>(V));
    const double active = active_bytes_per_token(*m);
    const double ceiling_tps = bw * 1e9 / active;
    std::vector<double> kv_bytes_of;  // per session, rings included
    for (const auto& se : sessions) kv_bytes_of.push_back(static_cast<double>(se->kv().cache().bytes()));
    const double kv_bytes = kv_bytes_of[0];
    double kv_total = 0;
    for (double b : kv_bytes_of) kv_total += b;

    const std::string name = m->config().arch + " " + m->config().name;
    // "+amx": the panel GEMMs (prefill over repacked weights) run on AMX tiles (kernels/cpu/isa.h amx_usable)
    const std::string backend = std::string("CPU (") + kernels::isa_name(m->kernels().isa()) + (m->kernels().amx() ? "+amx" : "") + (m->kernels().amx_bf16() ? "+amx-bf16" : "") + ")";
    std::vector<Row> rows;
    // --mem large enough for every expert: load them all now, so the warm-up and the timed runs
    // see the steady state (all hits) rather than the first misses of rarely routed experts.
    Timer preload_timer;
    const bool preloaded = m->expert_cache() && m->expert_cache()->load_all();
    if (preloaded)
        std::fprintf(stderr, "moe bench: every expert fits the cache: all loaded before the warm-up in %.3f s\n",
                     preload_timer.seconds());
    const std::string at_depth = depth > 0 ? " @ d" + std::to_string(depth) : "";
    if (depth > 0)  // the context every run starts from (runs truncate back to it)
        for (auto& se : sessions) se->eval(0, random_tokens(depth, V, 7777), logits.data(), false);
    auto reset = [&](runtime::Session& se) {
        // a sliding-window ring keeps max_batch - 1 rows past its window: enough to rewind a pp
        // run of up to max_batch rows; otherwise build the context again
        if (se.kv().cache().truncate(0, depth) != depth && depth > 0)
            se.eval(0, random_tokens(depth, V, 7777), logits.data(), false);
    };
    // This VM's read bandwidth drifts 2x within minutes, so a tg row's ceiling uses samples taken
    // around its own repetitions (child processes over footprint_mib or --membw-mib, best of 3: ~0.1 s
    // per 256 MiB), not the one taken before the load: rep r against the mean of the samples around it.
    // body(rep, secs) runs one repetition on every session and adds each one's seconds to secs[k];
    // one row per session (test name + " kv T" when there are several), the first row's index back.
    int64_t bracket_mib_used = 0;  // the tg rows' bandwidth samples' buffer (0: none taken)
    auto run_test = [&](const std::string& test, int64_t n, bool bracket_bw, auto&& body) {
        std::vector<double> secs(n_sess, 0.0);
        body(0, secs);  // warm-up
        for (auto& se : sessions) se->stats().reset(m->config().n_layer, static_cast<int>(m->config().n_expert));
        if (m->expert_cache()) m->expert_cache()->reset_counters();
        std::vector<std::vector<double>> tps(n_sess);
        std::vector<double> bw_around;
        bracket_bw = bracket_bw && !(bw_given > 0) && !ep;
        // the model's footprint (footprint_mib), less what the loaded model holds; or --membw-mib
        const int64_t bracket_mib = !bracket_bw ? 0 : membw_default ? footprint_mib(model, peak_rss_bytes()) : membw_mib;
        if (bracket_bw) {
            bracket_mib_used = bracket_mib;
            bw_around.push_back(measure_read_bw_child(threads, bracket_mib, 3));
        }
        for (int64_t r = 0; r < reps; ++r) {
            std::fill(secs.begin(), secs.end(), 0.0);
            body(r + 1, secs);
            for (size_t k = 0; k < n_sess; ++k) tps[k].push_back(static_cast<double>(n) / secs[k]);
            if (bracket_bw) bw_around.push_back(measure_read_bw_child(threads, bracket_mib, 3));
        }
        const size_t first = rows.size();
        for (size_t k = 0; k < n_sess; ++k) {
            Row row;
            row.test = n_sess > 1 ? test + " kv " + dtype_name(kv_types[k]) : test;
            row.kv = k;
            row.bw_around = bw_around;
            row.tps = tps[k];
            for (double v : row.tps) row.mean += v;
            row.mean /= static_cast<double>(row.tps.size());
            double var = 0;
            for (double v : row.tps) var += (v - row.mean) * (v - row.mean);
            row.sd = row.tps.size() > 1 ? std::sqrt(var / static_cast<double>(row.tps.size() - 1)) : 0.0;
            row.stats = sessions[k]->stats();
            if (const ExpertCache* c = m->expert_cache()) row.cache_summary = c->summary(), row.cache_json = c->json();
            rows.push_back(row);
        }
        return first;
    };
    // The session order turns with the repetition (pp) or the token (tg), so none always runs first.
    if (n_prompt > 0)
        run_test("pp" + std::to_string(n_prompt) + at_depth, n_prompt, false, [&](int64_t rep, std::vector<double>& secs) {
            const auto toks = random_tokens(n_prompt, V, static_cast<uint64_t>(rep));  // the same for every session
            for (size_t i = 0; i < n_sess; ++i) {
                const size_t k = (i + static_cast<size_t>(rep)) % n_sess;
                reset(*sessions[k]);
                Timer t;
                sessions[k]->eval(0, toks, logits.data(), false);
                secs[k] += t.seconds();
            }
        });
    if (n_gen > 0) {
        const size_t first = run_test("tg" + std::to_string(n_gen) + at_depth, n_gen, true, [&](int64_t rep, std::vector<double>& secs) {
            for (auto& se : sessions) reset(*se);
            const auto toks = random_tokens(n_gen, V, 1000 + static_cast<uint64_t>(rep));
            std::vector<int32_t> one(1);
            for (size_t j = 0; j < toks.size(); ++j) {
                one[0] = toks[j];
                for (size_t i = 0; i < n_sess; ++i) {
                    const size_t k = (i + j) % n_sess;
                    Timer t;
                    sessions[k]->eval(0, one, logits.data(), false);
                    secs[k] += t.seconds();
                }
            }
        });
        for (size_t k = 0; k < n_sess; ++k) {
            Row* r = &rows[first + k];
            r->ceiling_frac = r->mean / ceiling_tps;
            if (r->bw_around.size() == static_cast<size_t>(reps) + 1) {  // per rep against its own samples
                double f = 0;
                for (int64_t i = 0; i < reps; ++i) {
                    const double bw_i = 0.5 * (r->bw_around[static_cast<size_t>(i)] + r->bw_around[static_cast<size_t>(i) + 1]);
                    f += (r->tps[static_cast<size_t>(i)] * active) / (bw_i * 1e9);
                }
                r->ceiling_frac = f / static_cast<double>(reps);
            }
        }
    }
    const double rss = peak_rss_bytes();
    const double file = static_cast<double>(m->file_bytes());

    if (out_fmt == "json") {
        const std::string ep_json = ep ? ep->profile_json(*m) : std::string();  // collective
        std::printf("{\n  \"model\": \"%s\", \"file\": \"%s\", \"size_bytes\": %.0f, \"params\": %llu,\n", name.c_str(),
                    model.c_str(), file, static_cast<unsigned long long>(m->n_params()));
        std::printf("  \"backend\": \"%s\", \"threads\": %d, \"build\": \"moe-engine %s (%s)\",\n", backend.c_str(), threads,
                    MOE_VERSION, MOE_BUILD_FLAGS);
        std::printf("  \"membw_gbs\": %.2f, \"membw_buffer_mib\": %lld, \"bracket_buffer_mib\": %lld, \"active_bytes_per_token\": %.0f, \"ceiling_tps\": %.2f,\n",
                    bw, static_cast<long long>(bw_given > 0 ? 0 : membw_mib), static_cast<long long>(bracket_mib_used), active, ceiling_tps);
        // (kv_bytes / kv_type: the first session's; each test row has its own)
        std::printf("  \"peak_rss_bytes\": %.0f, \"kv_bytes\": %.0f, \"kv_type\": \"%s\", \"depth\": %lld, \"load_s\": %.4f, \"first_touch_s\": %.4f,\n", rss,
                    kv_bytes, dtype_name(kv_type), static_cast<long long>(depth), load_s, touch_s);
        std::printf("  \"tests\": [\n");
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            std::printf("    {\"test\": \"%s\", \"kv_type\": \"%s\", \"kv_bytes\": %.0f, \"tps_mean\": %.3f, \"tps_sd\": %.3f", r.test.c_str(),
                        dtype_name(kv_types[r.kv]), kv_bytes_of[r.kv], r.mean, r.sd);
            std::printf(", \"tps_reps\": [");
            for (size_t j = 0; j < r.tps.size(); ++j) std::printf("%s%.4f", j ? ", " : "", r.tps[j]);
            std::printf("]");
            if (r.ceiling_frac >= 0) std::printf(", \"ceiling_frac\": %.4f", r.ceiling_frac);
            if (!r.bw_around.empty()) {
                std::printf(", \"membw_around_gbs\": [");
                for (size_t j = 0; j < r.bw_around.size(); ++j) std::printf("%s%.4f", j ? ", " : "", r.bw_around[j]);
                std::printf("]");
            }
            std::printf(", \"split_s\": {");
            const auto sp = split_of(r.stats);
            for (size_t j = 0; j < sp.size(); ++j)
                std::printf("%s\"%s\": %.5f", j ? ", " : "", sp[j].name, sp[j].seconds);
            std::printf("}");
            if (!r.cache_json.empty()) std::printf(", \"expert_cache\": %s", r.cache_json.c_str());
            std::printf("}%s\n", i + 1 < rows.size() ? "," : "");
        }
        std::printf("  ]");
        if (!ep_json.empty()) std::printf(",\n  \"ep_profile\": %s", ep_json.c_str());
        std::printf("\n}\n");
        if (ep) ep->report(*m);
        return 0;
    }

    std::printf("| model | size | params | backend | threads | test | t/s | of BW ceiling |\n");
    std::printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: | ------------: |\n");
    for (const Row& r : rows) {
        char frac[32] = "";
        if (r.ceiling_frac >= 0) std::snprintf(frac, sizeof frac, "%.1f %%", 100.0 * r.ceiling_frac);
        std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %s |\n", name.c_str(), human_size(file).c_str(),
                    human_params(static_cast<double>(m->n_params())).c_str(), backend.c_str(), threads, r.test.c_str(),
                    r.mean, r.sd, frac);
    }
    std::printf("\nstage split (share of forward wall time over the timed repetitions):\n\n| test |");
    const auto names = split_of(model::ForwardStats{});
    for (const auto& s : names) std::printf(" %s |", s.name);
    std::printf("\n| --- |");
    for (size_t j = 0; j < names.size(); ++j) std::printf(" ---: |");
    std::printf("\n");
    for (const Row& r : rows) {
        std::printf("| %s |", r.test.c_str());
        for (const auto& s : split_of(r.stats))
            std::printf(" %.1f%% |", r.stats.total > 0 ? 100.0 * s.seconds / r.stats.total : 0.0);
        std::printf("\n");
    }
    for (const Row& r : rows)
        if (!r.cache_summary.empty()) std::printf("\n%s: %s", r.test.c_str(), r.cache_summary.c_str());
    if (m->expert_cache())
        std::printf("\nmemory budget %.1f MiB: resident %.1f MiB + KV %.1f MiB + scratch %.1f MiB + %d of %d experts\n",
                    m->memory_budget().budget / 1048576.0, m->memory_budget().resident / 1048576.0,
                    m->memory_budget().kv / 1048576.0, m->memory_budget().scratch / 1048576.0,
                    m->memory_budget().slots, m->memory_budget().total_experts);
    std::printf("\nread bandwidth %.2f GB/s (%s, %d threads, %lld MiB buffer); active weights %.3f GB/token -> ceiling %.2f t/s\n", bw,
                bw_given > 0 ? "given" : huge_pages_wanted() ? "measured on 2 MiB pages" : "measured on 4 KiB pages", threads,
                static_cast<long long>(bw_given > 0 ? 0 : membw_mib), active / 1e9, ceiling_tps);
    for (const Row& r : rows)
        if (!r.bw_around.empty()) {
            const auto [lo, hi] = std::minmax_element(r.bw_around.begin(), r.bw_around.end());
            std::printf("%s: read bandwidth before and after each repetition %.2f-%.2f GB/s (%lld MiB buffer); its \"of BW "
                        "ceiling\" is the mean over the repetitions of t/s x active bytes / the mean of the two samples around it\n",
                        r.test.c_str(), *lo, *hi, static_cast<long long>(bracket_mib_used));
        }
    for (size_t k = 0; k < n_sess; ++k)
        std::printf("KV cache %s: %s for %lld positions (%.0f bytes per token)\n", dtype_name(kv_types[k]),
                    human_size(kv_bytes_of[k]).c_str(), static_cast<long long>(mo.n_ctx),
                    kv_bytes_of[k] / static_cast<double>(mo.n_ctx));
    std::printf("peak RSS %s = %.3f x (file %s + KV %s); load %.3f s (mmap open + validate + bind), first touch of "
                "all weight pages %.3f s\n",
                human_size(rss).c_str(), rss / (file + kv_total), human_size(file).c_str(), human_size(kv_total).c_str(),
                load_s, touch_s);
    print_page_sizes(*m);
    if (!m->repack_note().empty()) std::printf("%s\n", m->repack_note().c_str());
    if (!m->amx_bf16_note().empty()) std::printf("%s\n", m->amx_bf16_note().c_str());
    if (m->panel_bytes() > 0 || m->dense_panel_bytes() > 0)
        std::printf("%s: %s of panels (Q2_K / Q3_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 routed and shared experts, made during the load above); "
                    "%s of blocks released (stacks whose prefill reads the panels too)\n",
                    m->options().cache.repack ? "--repack" : "--repack-experts", human_size(m->panel_bytes()).c_str(),
                    human_size(m->released_bytes()).c_str());
    if (m->options().cache.repack)
        std::printf("--repack: %s of panels (dense projections and lm head, %zu matrices), %s of their blocks released\n",
                    human_size(m->dense_panel_bytes()).c_str(), m->dense_matrices(), human_size(m->dense_released_bytes()).c_str());
    std::printf("\nbuild: moe-engine %s (%s)\n", MOE_VERSION, MOE_BUILD_FLAGS);
    if (ep) ep->report(*m);
    return 0;
}

}  // namespace moe::tools
