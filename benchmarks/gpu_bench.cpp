// crfx — one objective+gradient pass per corpus shape, on the GPU and on the CPU backend (all
// cores), against a roofline estimate of the pass (benchmarks/gpu.sh runs it). A pass is
// Backend::evaluate over every sentence at once (the full batch of L-BFGS; seq-log loss, fixed
// small weights); its time is the median of `repeat` passes after one warm-up. The roofline time
// is the pass's necessary work (pass_work below, counted from the corpus, not measured) at the
// device's peaks. Prints a table, then one RESULT line per shape (a device not run reads NA).
//
// Shapes:
//   zipf-L<n>       synthetic, n labels, Zipf-distributed attributes (zipf_corpus)
//   uniform-L<n>    synthetic, n labels, uniform attributes (uniform_corpus)
//   conll2000       CoNLL-2000 train.txt with chunking.template (--conll2000 DIR)
//   conll2002-esp   CoNLL-2002 esp.train / ned.train with --ner-template (--conll2002 DIR)
//   conll2002-ned
// The weights are the observed (attribute, label) pairs and label bigrams (CRFsuite's default,
// crfx's --features observed); a shape name ending in -all gives every pair (--features all).
//
// With --stream K (issue 38: a corpus larger than the GPU), per shape instead the GPU pass three
// ways: resident in one chunk (the table's), resident cut into about K chunks (CRFX_CHUNK_TOKENS),
// and streamed from pinned host memory in the same K chunks (CRFX_STREAM=1): the streamed pass's
// cost over the resident ones (the criterion: streamed ≤ 1.5× resident), and its loss, which must
// be bitwise the chunked one's; one `RESULT stream shape=…` line per shape.
//
// usage: crfx_gpu_bench [--shapes zipf-L5,zipf-L23,conll2000,…] [--gpu auto|require|off]
//                       [--tokens 200000] [--repeat 5] [--cpu-repeat 3] [--seed 1]
//                       [--peak-gflops 34000] [--peak-gbs 3350] [--conll2000 DIR]
//                       [--conll2002 DIR] [--ner-template FILE] [--stream K]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/features.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

/// Uniform in [0, 1) from the top 53 bits: the same stream for a seed on every standard library.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

/// 1 + a geometric variable of mean `mean` − 1, capped at 4·mean: sentence lengths with
/// CoNLL's long tail (mean 23.7 tokens in CoNLL-2000).
std::size_t sentence_length(std::mt19937_64& rng, double mean) {
  const double u = 1.0 - uniform01(rng);  // (0, 1]
  const double len = 1.0 + std::floor(std::log(u) / std::log(1.0 - 1.0 / mean));
  return std::size_t(std::min(len, 4.0 * mean));
}

/// Draws a rank in [0, n) with P(r) ∝ 1 / (r + 1)^s.
class Zipf {
 public:
  Zipf(std::uint32_t n, double s) : cdf_(n) {
    double sum = 0;
    for (std::uint32_t r = 0; r < n; ++r) cdf_[r] = sum += std::pow(double(r + 1), -s);
    for (double& c : cdf_) c /= sum;
  }
  std::uint32_t operator()(std::mt19937_64& rng) const {
    const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), uniform01(rng));
    return std::uint32_t(std::min<std::size_t>(it - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
};

/// Gold labels from a sparse Markov chain: label 0 (an "O") with probability 0.4, else one of
/// the previous label's (at most) three successors, drawn once per corpus.
class LabelChain {
 public:
  LabelChain(std::uint32_t L, std::mt19937_64& rng) : L_(L), next_(std::size_t(L) * 3) {
    for (auto& y : next_) y = std::uint32_t(rng() % L);
  }
  std::uint32_t first(std::mt19937_64& rng) const { return uniform01(rng) < 0.5 ? 0 : std::uint32_t(rng() % L_); }
  std::uint32_t after(std::uint32_t y, std::mt19937_64& rng) const {
    return uniform01(rng) < 0.4 ? 0 : next_[std::size_t(y) * 3 + rng() % 3];
  }

 private:
  std::uint32_t L_;
  std::vector<std::uint32_t> next_;  // [L][3]
};

/// About `tokens` tokens in sentences of mean length 23 (sentence_length); each token carries one
/// attribute per template-like slot: 15 slots always, 6 more with probability ½ each (15–21
/// items, mean 18), values drawn per slot from a Zipf law — a bias in every token, a word-shape
/// slot whose top value is in 70% of tokens, POS-like slots of 45 values, POS n-grams, and word,
/// word-bigram and suffix slots with a long tail. Attribute ids are numbered in order of first
/// occurrence, as a dictionary built from training data does (A = the attributes seen). Binary
/// attributes; gold labels from LabelChain. Deterministic for a seed.
crfx::Corpus zipf_corpus(std::uint32_t L, std::size_t tokens, std::uint64_t seed, std::uint32_t& A) {
  struct Slot {
    std::uint32_t values;
    double s, p;  // Zipf exponent, probability the slot fires
    int copies;
  };
  const Slot slots[] = {
      {1, 1.0, 1.0, 1},          // bias
      {4, 2.0, 1.0, 1},          // word shape
      {45, 1.0, 1.0, 5},         // POS at −2 … 2
      {1500, 1.0, 1.0, 4},       // POS bigrams
      {12000, 1.0, 1.0, 1},      // POS trigram
      {30000, 1.05, 1.0, 3},     // words at −1 … 1
      {30000, 1.05, 0.5, 2},     // words at ±2
      {150000, 1.0, 0.5, 2},     // word bigrams
      {3000, 1.0, 0.5, 2},       // suffixes
  };
  std::vector<Zipf> laws;
  std::vector<double> fire;
  std::vector<std::uint32_t> base;  // first raw id of each slot copy
  std::uint32_t raw = 0;
  for (const Slot& s : slots)
    for (int c = 0; c < s.copies; ++c) {
      laws.emplace_back(s.values, s.s);
      fire.push_back(s.p);
      base.push_back(raw);
      raw += s.values;
    }
  std::mt19937_64 rng(seed);
  const LabelChain chain(L, rng);
  std::unordered_map<std::uint32_t, std::uint32_t> ids;  // raw id → id in order of first occurrence
  crfx::Corpus c;
  while (c.labels.size() < tokens) {
    const std::size_t T = sentence_length(rng, 23.0);
    std::uint32_t y = 0;
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = 0; k < laws.size(); ++k) {
        if (fire[k] < 1.0 && uniform01(rng) >= fire[k]) continue;
        const std::uint32_t r = base[k] + laws[k](rng);
        c.state_ids.push_back(ids.emplace(r, std::uint32_t(ids.size())).first->second);
      }
      c.state_offsets.push_back(c.state_ids.size());
      c.edge_offsets.push_back(0);
      y = t == 0 ? chain.first(rng) : chain.after(y, rng);
      c.labels.push_back(y);
    }
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(c.sentence_offsets.size() - 1);
  }
  A = std::uint32_t(ids.size());
  return c;
}

/// About `tokens` tokens in sentences of lengths uniform in [15, 45], 20 binary attributes per
/// token uniform over A = 100,000, gold labels uniform.
crfx::Corpus uniform_corpus(std::uint32_t L, std::size_t tokens, std::uint64_t seed, std::uint32_t& A) {
  A = 100000;
  std::mt19937_64 rng(seed);
  crfx::Corpus c;
  while (c.labels.size() < tokens) {
    const std::size_t T = 15 + rng() % 31;
    for (std::size_t t = 0; t < T; ++t) {
      for (int k = 0; k < 20; ++k) c.state_ids.push_back(std::uint32_t(rng() % A));
      c.state_offsets.push_back(c.state_ids.size());
      c.edge_offsets.push_back(0);
      c.labels.push_back(std::uint32_t(rng() % L));
    }
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(c.sentence_offsets.size() - 1);
  }
  return c;
}

struct Shape {
  std::string name;
  crfx::Corpus corpus;
  crfx::Dims dims;
};

struct Paths {
  std::string conll2000, conll2002, ner_template;
};

/// The corpus and model sizes of shape `name` (see the file's first comment).
Shape make_shape(const std::string& name, std::size_t tokens, std::uint64_t seed, const Paths& paths) {
  Shape sh;
  sh.name = name;
  std::string base = name;
  const bool all = base.size() > 4 && base.compare(base.size() - 4, 4, "-all") == 0;
  if (all) base.resize(base.size() - 4);
  const auto labels_of = [&](const std::string& prefix) -> std::uint32_t {
    if (base.compare(0, prefix.size(), prefix) != 0) return 0;
    const std::string n = base.substr(prefix.size());
    if (n.empty() || n.size() > 5 || n.find_first_not_of("0123456789") != std::string::npos || std::stoul(n) < 2)
      throw crfx::Error("shape " + name + ": the label count must be a number ≥ 2");
    return std::uint32_t(std::stoul(n));
  };
  if (const std::uint32_t L = labels_of("zipf-L"); L) {
    sh.corpus = zipf_corpus(L, tokens, seed, sh.dims.A);
    sh.dims.L = L;
  } else if (const std::uint32_t L2 = labels_of("uniform-L"); L2) {
    sh.corpus = uniform_corpus(L2, tokens, seed, sh.dims.A);
    sh.dims.L = L2;
  } else {
    std::string data, templ;
    if (base == "conll2000") {
      data = paths.conll2000 + "/train.txt";
      templ = paths.conll2000 + "/chunking.template";
    } else if (base == "conll2002-esp" || base == "conll2002-ned") {
      data = paths.conll2002 + "/" + base.substr(10) + ".train";
      templ = paths.ner_template;
    } else {
      throw crfx::Error("unknown shape '" + name +
                        "' (zipf-L<n>, uniform-L<n>, conll2000, conll2002-esp, conll2002-ned; -all appended: every pair)");
    }
    crfx::FeatureSpace fs;
    fs.templ = crfx::FeatureTemplate::load(templ);
    sh.corpus = crfx::compile_training(fs, crfx::read_text(fs, data), 1);
    crfx::FeatureSet set;
    set.all_states = set.all_transitions = all;
    crfx::choose_layout(fs, sh.corpus, set);
    sh.dims = fs.dims();
    return sh;
  }
  if (!all) sh.dims.layout = std::make_shared<const crfx::WeightLayout>(crfx::observed_layout(sh.corpus, sh.dims));
  return sh;
}

/// Flops and DRAM bytes of one part of a pass.
struct Work {
  double flops = 0, bytes = 0;
};

/// The parts of a pass, in pipeline order (kernels/cuda_backend.cuh draws it).
struct PassWork {
  Work emissions, chain, reduction;
  Work total() const {
    return {emissions.flops + chain.flops + reduction.flops, emissions.bytes + chain.bytes + reduction.bytes};
  }
};

/// An exp or a log, in flops (a double-precision exp is a range reduction and a polynomial of
/// about this many operations).
constexpr double kExpFlops = 20;

/// The work one objective+gradient pass over `c` must do — a lower bound: what each stage of the
/// pipeline needs with every operand read from DRAM once and every result written once (any
/// re-read, recomputation or log-space fallback is on top). T tokens, S sentences, P = T − S
/// positions t ≥ 1, I state items, R = Σ over items of its attribute's row length (L when dense,
/// the observed row size in the sparse layout), W weights, X = kExpFlops; edge items (E > 0)
/// count like state items with their rows (L² when dense), and a position with edge items adds
/// its [L][L] matrix (written and read). Doubles are 8 B, ids 4 B; binary items carry no value.
///   emissions   flops 2·R (a multiply-add per row entry of each item);
///               bytes (4 + 8 if valued)·I item ids and values, 8·W weights (read once per pass:
///               the head of a Zipf vocabulary is in nearly every token and stays in L2, and
///               once is the floor for the tail), 8·T·L scores S written
///   chain       flops P·(2·2L² + 2·L·X): per position one L×L mat-vec and L exps forward and
///               one backward; + P·(3·L² + L·X): pairwise marginals as (a(y')·E(y', y))·v(y),
///               two multiplies and an add into the sentence's pair sum per entry and an exp per
///               row factor a(y') (v is the backward step's; an exp per entry is not needed);
///               + T·L·X: node marginals;
///               bytes 8·T·L S read, 16·T·L α and 16·T·L β (written and read), 8·T·L node
///               marginals written
///   reduction   flops 2·R (the gradient rows' multiply-adds over the items, as the emissions)
///               + L²·S (per-sentence pair sums into the transitions);
///               bytes 8·T·L node marginals read, (4 + 8 if valued)·I items read again (the
///               gather walks them by attribute), 16·L²·S pair sums written and read, 8·W
///               gradient written once
/// The roofline time of the pass is max(flops / peak flop rate, bytes / peak bandwidth).
PassWork pass_work(const crfx::Corpus& c, const crfx::Dims& dims) {
  const crfx::WeightGroups wg = dims.groups();
  const double T = double(c.num_tokens()), S = double(c.num_sentences()), P = T - S, L = double(dims.L),
               LL = L * L, X = kExpFlops, W = double(dims.num_weights());
  double R = 0;
  for (const std::uint32_t a : c.state_ids) R += double(wg.size(a));
  for (const std::uint32_t e : c.edge_ids) R += double(wg.size(wg.edge(e)));
  double edge_positions = 0;
  for (std::size_t t = 0; t < c.num_tokens(); ++t) edge_positions += c.edge_offsets[t + 1] > c.edge_offsets[t];
  const double item_bytes = (4.0 + (c.state_values.empty() ? 0 : 8)) * double(c.state_ids.size()) +
                            (4.0 + (c.edge_values.empty() ? 0 : 8)) * double(c.edge_ids.size());
  PassWork w;
  w.emissions.flops = 2 * R;
  w.emissions.bytes = item_bytes + 8 * W + 8 * T * L + 16 * LL * edge_positions;
  w.chain.flops = P * (2 * 2 * LL + 2 * L * X) + P * (3 * LL + L * X) + T * L * X;
  w.chain.bytes = 8 * T * L + 16 * T * L + 16 * T * L + 8 * T * L;
  w.reduction.flops = 2 * R + LL * S;
  w.reduction.bytes = 8 * T * L + item_bytes + 16 * LL * S + 8 * W;
  return w;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  bool ran = false;
  double seconds = 0, loss = 0;
};

/// Median seconds of `repeat` passes (after one warm-up) of evaluate over the whole corpus. On
/// the GPU, `chunk_tokens` > 0 caps its chunks (CRFX_CHUNK_TOKENS) and `stream` streams the corpus
/// (CRFX_STREAM=1); `note` receives the backend's note on the corpus ("… in 8 chunks …").
Timing time_pass(const Shape& sh, crfx::DeviceKind device, int repeat, std::size_t chunk_tokens = 0,
                 bool stream = false, std::string* note = nullptr) {
  crfx::BackendOptions bo;
  bo.device = device;
  bo.threads = 0;  // all cores
  if (chunk_tokens) setenv("CRFX_CHUNK_TOKENS", std::to_string(chunk_tokens).c_str(), 1);
  if (stream) setenv("CRFX_STREAM", "1", 1);
  crfx::BackendPtr b;
  try {
    b = crfx::make_backend(sh.dims, bo);
  } catch (...) {
    unsetenv("CRFX_CHUNK_TOKENS");
    unsetenv("CRFX_STREAM");
    throw;
  }
  unsetenv("CRFX_CHUNK_TOKENS");
  unsetenv("CRFX_STREAM");
  crfx::BackendCorpusPtr up = b->upload(sh.corpus);
  if (note) *note = b->corpus_note(*up);
  std::vector<double> host(sh.dims.num_weights());  // small non-zero weights, as crfx bench
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.01 * double(int(i % 17) - 8);
  crfx::VectorPtr w = crfx::to_backend(*b, host);
  crfx::VectorPtr g = b->vector(sh.dims.num_weights());
  std::vector<double> times;
  Timing out;
  out.ran = true;
  for (int k = 0; k <= repeat; ++k) {
    b->fill(*g, 0.0);
    (void)b->norm1(*g);  // the fill is done before the clock starts
    const double t0 = now();
    out.loss = b->evaluate(*up, *w, crfx::all_sentences(*up), g.get(), 1.0);  // returns after the pass
    if (k > 0) times.push_back(now() - t0);
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[times.size() / 2];
  return out;
}

std::string fixed(double v, int digits, bool present = true) {
  if (!present) return "NA";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double parse_number(const std::string& option, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x > 0) || !std::isfinite(x))
    throw crfx::Error(option + ": '" + v + "' is not a positive number");
  return x;
}

/// The command line (the file's first comment), with the default peaks' device.
struct Options {
  std::string shapes = "zipf-L5,zipf-L8,zipf-L23,zipf-L45,zipf-L128,conll2000,conll2000-all,conll2002-esp,conll2002-ned";
  std::string gpu = "auto";
  std::size_t tokens = 200000;
  int repeat = 5, cpu_repeat = 3;
  std::size_t stream = 0;  // --stream K: the streamed pass against the resident ones, in about K chunks
  std::uint64_t seed = 1;
  double peak_gflops = 34000, peak_gbs = 3350;
  bool peaks_given = false;
  std::string peaks_label = "H100 SXM";  // the default peaks' device
  Paths paths{"/work/shared/data/conll2000", "/work/shared/data/conll2002", "benchmarks/ner.template"};
};

/// Reads the options into `o`; false when --help was printed instead.
bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::printf("usage: crfx_gpu_bench [--shapes %s]\n"
                  "  [--gpu auto|require|off] [--tokens 200000] [--repeat 5] [--cpu-repeat 3] [--seed 1]\n"
                  "  [--peak-gflops 34000] [--peak-gbs 3350] [--conll2000 DIR] [--conll2002 DIR]\n"
                  "  [--ner-template FILE] [--stream K]   (shapes: zipf-L<n>, uniform-L<n>, conll2000,\n"
                  "  conll2002-esp, conll2002-ned; -all appended: every attribute x label pair)\n",
                  o.shapes.c_str());
      return false;
    }
    if (i + 1 >= argc) throw crfx::Error(k + ": a value is missing");
    const std::string v = argv[i + 1];
    if (k == "--shapes") o.shapes = v;
    else if (k == "--gpu") o.gpu = v;
    else if (k == "--tokens") o.tokens = std::size_t(parse_number(k, v));
    else if (k == "--repeat") o.repeat = int(parse_number(k, v));
    else if (k == "--cpu-repeat") o.cpu_repeat = int(parse_number(k, v));
    else if (k == "--seed") o.seed = std::uint64_t(parse_number(k, v));
    else if (k == "--peak-gflops") o.peak_gflops = parse_number(k, v), o.peaks_given = true;
    else if (k == "--peak-gbs") o.peak_gbs = parse_number(k, v), o.peaks_given = true;
    else if (k == "--conll2000") o.paths.conll2000 = v;
    else if (k == "--conll2002") o.paths.conll2002 = v;
    else if (k == "--ner-template") o.paths.ner_template = v;
    else if (k == "--stream") o.stream = std::size_t(parse_number(k, v));
    else throw crfx::Error("unknown option " + k);
  }
  if (o.gpu != "auto" && o.gpu != "require" && o.gpu != "off") throw crfx::Error("--gpu: auto, require or off");
  o.repeat = std::max(1, o.repeat);
  o.cpu_repeat = std::max(1, o.cpu_repeat);
  return true;
}

/// Whether the GPU runs (Error for --gpu require without one); prints the devices, the peaks
/// (an H200's bandwidth where one is found and no peaks are given) and the table's header.
bool start_table(Options& o, unsigned cpu_threads) {
  const std::string why_not = o.gpu == "off" ? "--gpu off" : crfx::gpu_unavailable();
  if (o.gpu == "require" && !why_not.empty()) throw crfx::Error("--gpu require: no usable GPU: " + why_not);
  const bool use_gpu = why_not.empty();
  std::printf("pass: objective + gradient (evaluate, seq-log) over the whole corpus; median of %d (GPU), %d (CPU) "
              "after a warm-up\n", o.repeat, o.cpu_repeat);
  if (use_gpu) {
    crfx::Dims d;
    d.L = 2;
    crfx::BackendOptions bo;
    bo.device = crfx::DeviceKind::cuda;
    const std::string gpu_name = crfx::make_backend(d, bo)->name();
    std::printf("GPU: %s\n", gpu_name.c_str());
    // An H200 is an H100's chip with HBM3e: the same fp64 rate, 4.8 TB/s (datasheet figures).
    if (!o.peaks_given && gpu_name.find("H200") != std::string::npos) o.peak_gbs = 4800, o.peaks_label = "H200";
  } else {
    std::printf("GPU: not used (%s): its columns read NA\n", why_not.c_str());
  }
  std::printf("CPU: %u threads, %s\n", cpu_threads, crfx::cpu_vector_code().c_str());
  std::printf("roofline peaks: %.0f GFLOP/s fp64, %.0f GB/s%s; an exp or log counted as %.0f flops\n", o.peak_gflops,
              o.peak_gbs,
              o.peaks_given ? " (given)" : (" (" + o.peaks_label + "'s datasheet: fp64 without tensor cores, HBM)").c_str(),
              kExpFlops);
  std::printf("ratios are time over time (gpu/cpu < 1: the GPU is faster); bound: the roofline's limit\n\n");
  std::printf("%-16s %8s %4s %9s %9s %5s %9s %9s %8s %8s %7s %9s %5s %9s %8s %8s\n", "shape", "tokens", "L", "A",
              "weights", "it/tk", "GPU ms", "CPU ms", "GPU Mt/s", "CPU Mt/s", "gpu/cpu", "roof ms", "bound",
              "gpu/roof", "GFLOP", "GB");
  return use_gpu;
}

/// One shape measured: its table row printed, its roofline by stage and RESULT line kept.
struct ShapeRun {
  std::string parts, result;
  bool losses_differ = false;  // the GPU's and the CPU's
};

ShapeRun run_shape(const std::string& name, const Options& o, bool use_gpu, unsigned cpu_threads) {
  const Shape sh = make_shape(name, o.tokens, o.seed, o.paths);
  const crfx::Corpus& c = sh.corpus;
  const PassWork pw = pass_work(c, sh.dims);
  const Work tw = pw.total();
  const double t_flops = tw.flops / (o.peak_gflops * 1e9), t_bytes = tw.bytes / (o.peak_gbs * 1e9);
  const double roof = std::max(t_flops, t_bytes);
  Timing g, h;
  if (use_gpu) g = time_pass(sh, crfx::DeviceKind::cuda, o.repeat);
  h = time_pass(sh, crfx::DeviceKind::cpu, o.cpu_repeat);
  const double N = double(c.num_tokens());
  const double items = double(c.state_ids.size()) / N;
  std::printf("%-16s %8zu %4u %9u %9zu %5.1f %9s %9s %8s %8s %7s %9.4f %5s %9s %8.3f %8.3f\n", name.c_str(),
              c.num_tokens(), sh.dims.L, sh.dims.A, sh.dims.num_weights(), items,
              fixed(g.seconds * 1e3, 3, g.ran).c_str(), fixed(h.seconds * 1e3, 3).c_str(),
              fixed(N / g.seconds / 1e6, 2, g.ran).c_str(), fixed(N / h.seconds / 1e6, 2).c_str(),
              fixed(g.seconds / h.seconds, 3, g.ran).c_str(), roof * 1e3, t_flops >= t_bytes ? "flops" : "bytes",
              fixed(g.seconds / roof, 1, g.ran).c_str(), tw.flops / 1e9, tw.bytes / 1e9);
  std::fflush(stdout);
  ShapeRun run;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-16s %9.3f %8.3f %9.3f %8.3f %9.3f %8.3f", name.c_str(), pw.emissions.flops / 1e9,
                pw.emissions.bytes / 1e9, pw.chain.flops / 1e9, pw.chain.bytes / 1e9, pw.reduction.flops / 1e9,
                pw.reduction.bytes / 1e9);
  run.parts = buf;
  std::ostringstream r;
  r << "RESULT shape=" << name << " tokens=" << c.num_tokens() << " sentences=" << c.num_sentences()
    << " L=" << sh.dims.L << " A=" << sh.dims.A << " nnz=" << sh.dims.num_weights()
    << " items=" << c.state_ids.size() << " gpu_ms=" << fixed(g.seconds * 1e3, 4, g.ran)
    << " cpu_ms=" << fixed(h.seconds * 1e3, 4) << " cpu_threads=" << cpu_threads
    << " gpu_over_cpu=" << fixed(g.seconds / h.seconds, 4, g.ran) << " roof_ms=" << fixed(roof * 1e3, 5)
    << " gpu_over_roof=" << fixed(g.seconds / roof, 2, g.ran) << " flops=" << fixed(tw.flops, 0)
    << " bytes=" << fixed(tw.bytes, 0) << " peak_gflops=" << fixed(o.peak_gflops, 0)
    << " peak_gbs=" << fixed(o.peak_gbs, 0) << " gpu_loss=" << fixed(g.loss, 6, g.ran)
    << " cpu_loss=" << fixed(h.loss, 6);
  run.result = r.str();
  // Both backends compute the same sum in different orders: far apart means a wrong pass.
  if (g.ran && !(std::abs(g.loss - h.loss) <= 1e-6 * std::max(1.0, std::abs(h.loss)))) {
    std::fprintf(stderr, "crfx_gpu_bench: %s: the GPU's loss %.9g differs from the CPU's %.9g\n", name.c_str(),
                 g.loss, h.loss);
    run.losses_differ = true;
  }
  return run;
}

/// --stream K: the GPU pass resident (one chunk), resident in about K chunks and streamed in the
/// same chunks; a line and a RESULT line. False where the streamed loss is not bitwise the
/// chunked resident one's (the same chunks must give the same sums).
bool run_stream(const std::string& name, const Options& o, std::string& result) {
  const Shape sh = make_shape(name, o.tokens, o.seed, o.paths);
  const std::size_t N = sh.corpus.num_tokens();
  const std::size_t cap = std::max<std::size_t>(1, (N + o.stream - 1) / o.stream);
  std::string note;
  const Timing whole = time_pass(sh, crfx::DeviceKind::cuda, o.repeat);
  const Timing chunked = time_pass(sh, crfx::DeviceKind::cuda, o.repeat, cap);
  const Timing streamed = time_pass(sh, crfx::DeviceKind::cuda, o.repeat, cap, true, &note);
  const auto at = note.find(" in ");
  const std::string chunks = at == std::string::npos ? "NA" : std::to_string(std::stoul(note.substr(at + 4)));
  const bool same = std::memcmp(&chunked.loss, &streamed.loss, sizeof(double)) == 0;
  std::printf("%-16s %8zu tokens, %s chunks: resident %9.3f ms, chunked %9.3f ms, streamed %9.3f ms; "
              "streamed/resident %.3f, streamed/chunked %.3f%s\n",
              name.c_str(), N, chunks.c_str(), whole.seconds * 1e3, chunked.seconds * 1e3, streamed.seconds * 1e3,
              streamed.seconds / whole.seconds, streamed.seconds / chunked.seconds,
              same ? "" : "  LOSS DIFFERS from the chunked pass's");
  std::fflush(stdout);
  std::ostringstream r;
  r << "RESULT stream shape=" << name << " tokens=" << N << " chunks=" << chunks
    << " resident_ms=" << fixed(whole.seconds * 1e3, 4) << " chunked_ms=" << fixed(chunked.seconds * 1e3, 4)
    << " streamed_ms=" << fixed(streamed.seconds * 1e3, 4)
    << " streamed_over_resident=" << fixed(streamed.seconds / whole.seconds, 4)
    << " streamed_over_chunked=" << fixed(streamed.seconds / chunked.seconds, 4) << " same_loss=" << (same ? 1 : 0);
  result = r.str();
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> results;  // the RESULT lines, printed after the table
  try {
    Options o;
    if (!parse_options(argc, argv, o)) return 0;
    const unsigned cpu_threads = std::max(1u, std::thread::hardware_concurrency());
    if (o.stream) {  // the streamed pass against the resident ones (the GPU only)
      const std::string why_not = crfx::gpu_unavailable();
      if (!why_not.empty()) throw crfx::Error("--stream: no usable GPU: " + why_not);
      std::printf("stream: one objective+gradient pass, resident, cut into about %zu chunks, and streamed in the same "
                  "chunks; median of %d after a warm-up\n", o.stream, o.repeat);
      int differ = 0;
      for (const std::string& name : split(o.shapes)) {
        std::string r;
        differ += !run_stream(name, o, r);
        results.push_back(r);
      }
      std::printf("\n");
      for (const std::string& r : results) std::printf("%s\n", r.c_str());
      return differ ? 1 : 0;
    }
    const bool use_gpu = start_table(o, cpu_threads);
    std::vector<std::string> parts;  // the roofline by stage, printed after the table
    int mismatches = 0;
    for (const std::string& name : split(o.shapes)) {
      ShapeRun run = run_shape(name, o, use_gpu, cpu_threads);
      parts.push_back(run.parts);
      results.push_back(run.result);
      mismatches += run.losses_differ;
    }
    std::printf("\nroofline by stage (pass_work): GFLOP and GB\n%-16s %9s %8s %9s %8s %9s %8s\n", "shape",
                "emis GF", "emis GB", "chain GF", "chain GB", "reduce GF", "reduce GB");
    for (const std::string& p : parts) std::printf("%s\n", p.c_str());
    std::printf("\n");
    for (const std::string& r : results) std::printf("%s\n", r.c_str());
    if (mismatches) {
      std::fprintf(stderr, "crfx_gpu_bench: %d shape(s) with different losses on the GPU and the CPU\n", mismatches);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    for (const std::string& r : results) std::printf("%s\n", r.c_str());  // the shapes measured before
    std::fflush(stdout);
    std::fprintf(stderr, "crfx_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
