// TrainingCompiler::add_file and add_crfsuite_file: a CoNLL or CRFsuite training file read and
// compiled on several threads.
//
//   TextChunker: a batch of text (4 MB a thread, 8 MB at most; on several threads the first
//     batches smaller, 1/16 of that, then twice as large each time), one chunk of whole sentences a thread
//     → in parallel, per chunk (a shard): parse_conll_chunk, then expand_conll against the
//       dictionaries as they stand before the batch (read only, shared): a string they hold
//       gets its id, a new one kLocal + its index in the shard's own dictionary (in the order
//       the shard meets it); the caches the slots share (ExpandCaches::shared), holding what
//       the earlier batches met, spare it those strings, the slot's own (an overlay) the
//       batch's new ones it meets again
//     → in order, on one thread: each shard's new strings added to the dictionaries in that
//       order (Dictionary::absorb; a string an earlier shard added gets that id)
//     → in parallel: each shard's items renumbered and copied into the corpus at its place
//     → the slots' new column values added to the shared caches, then their new keys, line by
//       line in parallel, with the dictionaries' ids
//
// Adding the shards' new strings shard after shard, each shard's in its own order, is adding
// every string at its first appearance in the text: the ids, and so the model, are those of
// one thread reading the whole text (TrainingCompiler::add), whatever the thread count. The
// same holds for errors: a shard stops at its first bad line and the merge, in text order,
// throws the first shard's, so the message is the one line-by-line reading gives. The batch's
// text is bounded (kMaxBatchBytes) so that the reading's memory beside the corpus stays that of a
// few batches of one thread.
//
// A CRFsuite shard (compile_crfsuite_shard) does the same with lines of `label<TAB>attr[:value]…`:
// CrfsuiteReader's checks line by line, the label looked up as it comes, the attributes a block
// of about a thousand at a time (Dictionary::find_many fetches their slots and strings ahead:
// one look-up at a time, each waited for memory's round trips). The shards keep values (as
// CrfsuiteAdder does, dropped at finish when all are 1) only from the first that is not 1 on.
// The reader's verdict on lines that look like CoNLL columns is taken, as the batches come, over
// the file's first 100 non-blank lines (ShapeEvidence): an error among them comes first, with
// the verdict's words where it is an attribute's, then the refusal, then later errors.
#include <algorithm>
#include <atomic>
#include <deque>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "features/expand.hpp"
#include "features/input_checks.hpp"
#include "io/text_chunks.hpp"
#include "util/thread_pool.hpp"

namespace crfx {

namespace {

using features_detail::bump;

/// A shard's id for a string the dictionary did not hold before the batch: kLocal + its index
/// in the shard's own dictionary (the dictionaries, kept below 2^31 strings, never reach it).
constexpr std::uint32_t kLocal = 0x80000000u;

/// The text a batch holds at most, when several threads share it (add_file).
constexpr std::uint64_t kMaxBatchBytes = std::uint64_t(8) << 20;

/// The first batches of a file read on several threads are smaller (add_file): 2^-kRamp of the
/// others, then twice as large each time.
constexpr unsigned kRamp = 4;

/// The shared caches are emptied before a batch once they hold more, so that the reading's
/// memory stays bounded whatever the text (CoNLL-2000 with the chunking template: 13 MB).
constexpr std::size_t kMaxCacheBytes = std::size_t(64) << 20;

/// A shard's view of one dictionary (expand_conll's Sink).
struct ShardSink {
  const Dictionary* global = nullptr;  // as before the batch: only read while shards run
  Dictionary added;                    // the shard's strings new to `global`, in its order
  std::vector<std::pair<std::uint32_t, std::uint32_t>> counted;  // (id as given, occurrences)
  // [id] occurrences of the dictionary's ids, as the shared caches' hits come (CoNLL: a pair an
  // item would be most of the items); added up and zeroed by add_known, once a batch.
  std::vector<std::uint32_t> known;
  std::uint32_t lookup(std::string_view s) {
    const std::size_t h = std::hash<std::string_view>{}(s);
    const std::uint32_t id = global->find(s, h);
    return id != Dictionary::kNone ? id : kLocal | added.add(s, h);
  }
  bool counting_ = true;  // min_freq > 1 (the occurrences are not needed otherwise)
  bool counting() const { return counting_; }
  void count(std::uint32_t id, std::uint32_t n) {
    if (id & kLocal) counted.emplace_back(id, n);
    else bump(known, id, n);
  }
  void reset(const Dictionary& dict, bool counting) {
    global = &dict;
    counting_ = counting;
    added = Dictionary();
    counted.clear();
    if (!counting) known.clear();  // (else add_known left it zero)
  }
};

/// expand_conll's tokens for a parsed chunk.
class ChunkTokens {
 public:
  explicit ChunkTokens(const ConllChunk& chunk) : c_(chunk) {}
  std::size_t sentences() const { return c_.sentence_ends.size(); }
  std::size_t end(std::size_t s) const { return c_.sentence_ends[s]; }
  std::size_t line(std::size_t s) const { return c_.sentence_lines[s]; }
  std::string_view cell(std::size_t k, std::size_t col) const { return c_.cells[k * c_.columns + col]; }
  void expand(const FeatureTemplate::Line& line, std::size_t s, std::size_t t, std::string& out) const {
    const std::size_t first = s == 0 ? 0 : end(s - 1);
    FeatureTemplate::expand(
        line, end(s) - first, t, [&](std::size_t i, int col) { return cell(first + i, std::size_t(col)); }, out);
  }

 private:
  const ConllChunk& c_;
};

struct Shard {
  TextChunk chunk;
  ConllChunk tokens;
  Corpus c;  // ids as the sinks gave them
  ShardSink labels, state, edge;
  std::vector<std::uint32_t> label_ids, state_ids, edge_ids;  // the added strings' ids, after the merge
  std::exception_ptr error;
  std::size_t error_line = 0;    // CRFsuite: the bad line's number
  bool attribute_error = false;  // CRFsuite: the error is an attribute's (CrfsuiteShape may explain it)
  // The batch's values and keys the shared caches lack, as the slot meets them (an overlay).
  features_detail::ExpandCaches caches;
};

/// Empties `c` keeping its arrays' memory (a shard's corpus, batch after batch).
void clear(Corpus& c) {
  for (auto* v : {&c.sentence_offsets, &c.state_offsets, &c.edge_offsets, &c.source_lines}) v->assign(1, 0);
  c.source_lines.clear();
  c.state_ids.clear(), c.edge_ids.clear(), c.labels.clear();
  c.state_values.clear(), c.edge_values.clear();
}

/// Runs fn(i) for i in [0, n) on the pool's threads (this one among them; the pool's threads are
/// made once a file: a thread made for each loop cost ~40 µs, and a batch runs three loops).
void parallel(std::size_t n, ThreadPool& pool, const std::function<void(std::size_t)>& fn) {
  pool.run(n, [&fn](std::size_t i, unsigned) { fn(i); });
}

/// What the shards of a file share.
struct FileContext {
  const FeatureSpace* fs;
  const std::string* path;
  std::size_t columns = 0, first_line = 0;  // the file's first token's
  bool edges;                               // B lines expanded (a CRF)
  bool expand = true;                       // false: only parsed (the columns are refused)
};

/// Parses and expands one shard (a worker; an error is kept for the merge to throw in order).
void compile_shard(Shard& sh, const FileContext& f) {
  try {
    parse_conll_chunk(sh.chunk, *f.path, f.columns, f.first_line, sh.tokens);
    if (!f.expand || sh.tokens.tokens() == 0) return;  // (no token: the file's columns may be unknown)
    const ChunkTokens tokens(sh.tokens);
    const std::size_t C = sh.tokens.columns;
    std::unordered_map<std::string_view, std::uint32_t> seen;  // the shard's labels so far
    auto label = [&](std::size_t k) {
      const std::string_view name = tokens.cell(k, C - 1);
      auto it = seen.find(name);
      if (it == seen.end()) it = seen.emplace(name, sh.labels.lookup(std::string(name))).first;
      return it->second;
    };
    features_detail::expand_conll(f.fs->templ, C - 1, tokens, sh.c, sh.state, sh.edge, f.edges, label, sh.caches);
  } catch (...) {
    sh.error = std::current_exception();
  }
}

inline std::uint32_t global_id(std::uint32_t id, const std::vector<std::uint32_t>& added) {
  return id & kLocal ? added[id & ~kLocal] : id;
}

/// The dictionary's ids for a shard's added strings (their first appearance, if no earlier
/// shard of the batch had them), and the occurrences of those counted into `count` (add_known
/// adds the others').
std::vector<std::uint32_t> merge(Dictionary& dict, ShardSink& sink, std::vector<std::uint32_t>* count) {
  std::vector<std::uint32_t> ids = dict.absorb(std::move(sink.added));
  if (dict.size() >= kLocal) throw Error("more than 2^31 distinct labels or attributes");
  if (count)
    for (const auto& [id, n] : sink.counted) bump(*count, global_id(id, ids), n);
  return ids;
}

/// The shards' occurrences of the ids their dictionary held before the batch (ShardSink::known)
/// added to `count`, and zeroed for the next batch: in parallel over ranges of ids (one thread,
/// a shard after another, walked the dictionary's size for each: with --min-freq, on 16 threads,
/// a third of the reading).
void add_known(std::vector<Shard>& shards, std::size_t n, ThreadPool& pool, ShardSink Shard::*sink,
               std::vector<std::uint32_t>& count) {
  std::size_t size = 0;
  for (std::size_t i = 0; i < n; ++i) size = std::max(size, (shards[i].*sink).known.size());
  if (size == 0) return;
  if (count.size() < size) count.resize(size, 0);
  constexpr std::size_t kRange = std::size_t(1) << 16;
  parallel((size + kRange - 1) / kRange, pool, [&](std::size_t r) {
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::uint32_t>& known = (shards[i].*sink).known;
      for (std::size_t id = r * kRange; id < std::min(known.size(), (r + 1) * kRange); ++id)
        count[id] += std::exchange(known[id], 0);
    }
  });
}

/// Where a shard's rows go in the corpus: its first token, sentence and items.
struct Place {
  std::size_t token, sentence, state, edge;
};

/// Copies a shard's rows into `c` at `at` (the arrays already sized), ids renumbered.
void place(const Shard& sh, const Place& at, Corpus& c) {
  const Corpus& s = sh.c;
  const std::size_t N = s.labels.size();
  for (std::size_t k = 0; k < N; ++k) {
    c.labels[at.token + k] = global_id(s.labels[k], sh.label_ids);
    c.state_offsets[at.token + 1 + k] = at.state + s.state_offsets[k + 1];
    c.edge_offsets[at.token + 1 + k] = at.edge + s.edge_offsets[k + 1];
  }
  for (std::size_t i = 0; i < s.state_ids.size(); ++i) c.state_ids[at.state + i] = global_id(s.state_ids[i], sh.state_ids);
  std::copy(s.state_values.begin(), s.state_values.end(), c.state_values.begin() + std::ptrdiff_t(at.state));
  for (std::size_t i = 0; i < s.edge_ids.size(); ++i) c.edge_ids[at.edge + i] = global_id(s.edge_ids[i], sh.edge_ids);
  for (std::size_t i = 0; i < s.source_lines.size(); ++i) {
    c.source_lines[at.sentence + i] = s.source_lines[i];
    c.sentence_offsets[at.sentence + 1 + i] = at.token + s.sentence_offsets[i + 1];
  }
}

/// A batch's text: `n` chunks of `bytes` in all, whether the file may hold more (the last next()
/// was true), and the chunker's bytes_done() after them.
struct BatchText {
  std::size_t n = 0;
  std::uint64_t bytes = 0;  // the chunks' text
  bool more = true;
  std::uint64_t bytes_done = 0;
};

/// Reads up to `count` chunks of about `target` bytes each into chunk(0), chunk(1), ….
template <class ChunkAt>
BatchText read_batch(TextChunker& chunker, std::size_t count, std::size_t target, ChunkAt chunk) {
  BatchText b;
  while (b.n < count && (b.more = chunker.next(chunk(b.n), target))) b.bytes += chunk(b.n++).text.size();
  b.bytes_done = chunker.bytes_done();
  return b;
}

/// What one thread did while a batch waited for it, now beside the batch's compile on a helper
/// thread (add_file and add_crfsuite_file on several threads): the next batch's text read, and the
/// corpus's arrays grown for this one — a resize's fill takes the new pages' faults, and made by
/// the merge it was most of the reading's serial time (CoNLL-2000 ×10: 0.1 s of 0.15 s, the file's
/// read 0.02 s). The growth stays within the arrays' capacity (reserve_for's projection), so that
/// neither the memory check's figures nor the arrays' addresses change; the merge takes the sizes
/// the arrays had and gives each its batch's end (a shrink, or a shorter fill). The chunker and the
/// arrays are the helper's alone until join(); an error in its reading is thrown when its text is
/// taken, after the batch before it (the order of reading on one thread).
class Ahead {
 public:
  Ahead(TextChunker& chunker, std::size_t chunks, bool helper)
      : chunker_(chunker), spare_(helper ? chunks : 0) {}
  Ahead(const Ahead&) = delete;
  Ahead& operator=(const Ahead&) = delete;
  ~Ahead() { undo(); }

  /// The next batch's text into the shards' chunks: what the helper read, else read now.
  BatchText text(std::vector<Shard>& shards, std::size_t target) {
    join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if (!read_)
      return read_batch(chunker_, shards.size(), target, [&](std::size_t i) -> TextChunk& { return shards[i].chunk; });
    read_ = false;
    for (std::size_t i = 0; i < batch_.n; ++i) std::swap(spare_[i], shards[i].chunk);
    return batch_;
  }
  /// On the helper (when it has one): `c`'s arrays grown for this batch, of `bytes` of text, as the
  /// last batch's `last_bytes` of text `added` to them (and 1/16 more), then the batch after this
  /// one read, of about `next_target` bytes a chunk.
  void start(Corpus& c, const Place& added, std::uint64_t last_bytes, std::uint64_t bytes, std::size_t next_target) {
    if (spare_.empty()) return;
    undo();
    c_ = &c, size_ = size_of(c);
    const double scale = last_bytes > 0 ? double(bytes) / double(last_bytes) * (1 + 1.0 / 16) : 0;
    helper_ = std::thread([this, &c, added, scale, next_target] {
      auto grow = [scale](auto& v, std::size_t added, auto fill) {
        const std::size_t to = std::min(v.capacity(), v.size() + std::size_t(double(added) * scale));
        if (to > v.size()) v.resize(to, fill);
      };
      grow(c.labels, added.token, 0u);
      grow(c.state_offsets, added.token, std::size_t(0));
      grow(c.edge_offsets, added.token, std::size_t(0));
      grow(c.state_ids, added.state, 0u);
      if (!c.state_values.empty()) grow(c.state_values, added.state, 1.0);
      grow(c.edge_ids, added.edge, 0u);
      grow(c.source_lines, added.sentence, std::size_t(0));
      grow(c.sentence_offsets, added.sentence, std::size_t(0));
      try {
        auto spare = [this](std::size_t i) -> TextChunk& { return spare_[i]; };
        batch_ = read_batch(chunker_, spare_.size(), next_target, spare);
      } catch (...) {
        error_ = std::current_exception();
      }
      read_ = true;
    });
  }
  /// Waits for the helper: the sizes `c`'s arrays had before its growth (the batches' so far).
  Place take(const Corpus& c) {
    join();
    if (!c_) return size_of(c);
    c_ = nullptr;
    return size_;
  }
  static Place size_of(const Corpus& c) {
    return Place{c.labels.size(), c.source_lines.size(), c.state_ids.size(), c.edge_ids.size()};
  }

 private:
  void join() {
    if (helper_.joinable()) helper_.join();
  }
  /// A growth not taken (the file's end, an error) undone.
  void undo() {
    join();
    if (!c_) return;
    Corpus& c = *c_;
    c.labels.resize(size_.token), c.state_offsets.resize(size_.token + 1), c.edge_offsets.resize(size_.token + 1);
    c.state_ids.resize(size_.state), c.edge_ids.resize(size_.edge);
    if (!c.state_values.empty()) c.state_values.resize(size_.state);
    c.source_lines.resize(size_.sentence), c.sentence_offsets.resize(size_.sentence + 1);
    c_ = nullptr;
  }
  TextChunker& chunker_;
  std::vector<TextChunk> spare_;  // the helper's batch (none: no helper)
  BatchText batch_;
  bool read_ = false;  // spare_ holds the next batch
  std::exception_ptr error_;
  std::thread helper_;
  Corpus* c_ = nullptr;  // the arrays grown, until taken
  Place size_{};
};

/// The merge: the shards' new strings into the dictionaries in the shards' order (the first
/// error in text order thrown), then their rows into `c`, on the pool's threads, once `ahead`'s
/// helper is done. Returns what the batch added.
Place add_shards(std::vector<Shard>& shards, std::size_t n, ThreadPool& pool, FeatureSpace& fs, Corpus& c,
                 std::vector<std::uint32_t>& state_count, std::vector<std::uint32_t>& edge_count, Ahead& ahead) {
  std::vector<Place> at(n);  // (from the batch's start, then from the corpus's)
  Place end{0, 0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    Shard& sh = shards[i];
    if (sh.error) std::rethrow_exception(sh.error);
    sh.label_ids = merge(fs.labels, sh.labels, nullptr);
    sh.state_ids = merge(fs.state_attrs, sh.state, &state_count);
    sh.edge_ids = merge(fs.edge_attrs, sh.edge, &edge_count);
    at[i] = end;
    end.token += sh.c.labels.size();
    end.sentence += sh.c.source_lines.size();
    end.state += sh.c.state_ids.size();
    end.edge += sh.c.edge_ids.size();
  }
  add_known(shards, n, pool, &Shard::state, state_count);
  add_known(shards, n, pool, &Shard::edge, edge_count);
  const Place added = end, begin = ahead.take(c);
  auto shift = [&begin](Place& p) {
    p.token += begin.token, p.sentence += begin.sentence, p.state += begin.state, p.edge += begin.edge;
  };
  for (Place& p : at) shift(p);
  shift(end);
  c.labels.resize(end.token);
  c.state_offsets.resize(end.token + 1);
  c.edge_offsets.resize(end.token + 1);
  c.state_ids.resize(end.state);
  // CRFsuite values, kept from the first that is not 1 on (the items before it get 1).
  if (!c.state_values.empty() || std::any_of(shards.begin(), shards.begin() + std::ptrdiff_t(n),
                                             [](const Shard& sh) { return !sh.c.state_values.empty(); }))
    c.state_values.resize(end.state, 1.0);
  c.edge_ids.resize(end.edge);
  c.source_lines.resize(end.sentence);
  c.sentence_offsets.resize(end.sentence + 1);
  parallel(n, pool, [&](std::size_t i) { place(shards[i], at[i], c); });
  return added;
}

using features_detail::ExpandCaches;
using Codes = std::vector<std::vector<std::uint32_t>>;  // [column][an overlay's code] the shared caches' code

/// `overlay`'s values of each column added to the shared caches' (their codes returned). Any
/// order of the overlays gives the same ids: a code is only a part of the keys, each of which
/// stands for one string.
Codes add_columns(ExpandCaches& shared, const ExpandCaches& overlay) {
  if (shared.columns.size() < overlay.columns.size()) shared.columns.resize(overlay.columns.size());
  Codes codes(overlay.columns.size());
  for (std::size_t col = 0; col < overlay.columns.size(); ++col) {
    const features_detail::ColumnCodes& from = overlay.columns[col];
    codes[col].resize(from.size());
    for (std::uint32_t c = 0; c < from.size(); ++c)
      codes[col][c] = shared.columns[col].code(from.value(c), from.hash(c));
  }
  return codes;
}

/// Line l of `overlay` added to the shared caches' line l, its codes translated (add_columns'
/// `codes`), each key with id(the overlay's id): its string's id in the dictionary, once the
/// batch's new strings are in it.
template <class Id>
void add_keys(ExpandCaches& shared, std::size_t l, const ExpandCaches& overlay, const Codes& codes, Id id) {
  features_detail::LineCache& to = shared.line(l);
  const features_detail::LineCache& from = overlay.line(l);
  const auto& macros = from.macros();
  from.for_each([&](const std::uint32_t* key, std::uint32_t held) {
    std::uint32_t k[features_detail::kMaxKeyed] = {key[0], key[1], key[2]};
    for (std::size_t j = 0; j < macros.size(); ++j) {
      const std::size_t col = std::size_t(macros[j].col), base = overlay.base[col];
      if (k[j] < features_detail::kBefore && k[j] >= base) k[j] = codes[col][k[j] - base];
    }
    to.set(k, held == Dictionary::kNone ? held : id(held));
  });
}

/// After the merge: the shards' overlays added to the shared caches, in the shards' order (any
/// would do), their ids the dictionaries'; the values first, then the keys line by line, in
/// parallel, each line planned for the values (LineCache::replan).
void share_caches(std::vector<Shard>& shards, std::size_t n, ThreadPool& pool, ExpandCaches& shared,
                  std::size_t tokens) {
  std::vector<Codes> codes(n);
  for (std::size_t i = 0; i < n; ++i) codes[i] = add_columns(shared, shards[i].caches);
  std::vector<std::uint32_t> values;
  for (const features_detail::ColumnCodes& col : shared.columns) values.push_back(col.size());
  parallel(shared.lines(), pool, [&](std::size_t l) {
    shared.line(l).replan(values, tokens);
    const bool state = l < shared.unigrams.size();
    for (std::size_t i = 0; i < n; ++i) {
      const Shard& sh = shards[i];
      if (sh.caches.lines() != shared.lines()) continue;  // (not expanded: an error, or no token)
      const std::vector<std::uint32_t>& ids = state ? sh.state_ids : sh.edge_ids;
      add_keys(shared, l, sh.caches, codes[i], [&](std::uint32_t id) { return global_id(id, ids); });
    }
  });
}

/// A CRFsuite shard's attributes of a few lines, looked up together (Dictionary::find_many).
struct AttributeBlock {
  static constexpr std::size_t kItems = 1024;  // a block's attributes, about
  std::vector<std::string_view> names;  // views of the chunk's text, or of `decoded`
  std::vector<std::size_t> hashes;
  std::vector<double> values;
  std::vector<std::uint32_t> ids;
  std::vector<std::size_t> token_ends;  // [tokens] one past each token's last attribute
  std::deque<std::string> decoded;      // the names with escapes or values, decoded

  void add(std::string_view line, std::string_view name, double value) {
    if (std::less<const char*>()(name.data(), line.data()) || std::less<const char*>()(line.end(), name.data()))
      name = decoded.emplace_back(name);  // (a view of the decoder's scratch)
    names.push_back(name);
    hashes.push_back(std::hash<std::string_view>{}(name));
    values.push_back(value);
  }
  /// The block's items and token ends into the shard's corpus, the block emptied: ids in the
  /// order of the text, the strings new to the dictionary added to the shard's in that order.
  void flush(Shard& sh) {
    Corpus& c = sh.c;
    const std::size_t n = names.size(), base = c.state_ids.size();
    ids.resize(n);
    sh.state.global->find_many(names.data(), hashes.data(), n, ids.data());
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t id = ids[i] != Dictionary::kNone ? ids[i] : kLocal | sh.state.added.add(names[i], hashes[i]);
      if (sh.state.counting()) sh.state.counted.emplace_back(id, 1);  // (`known` is the shared caches')
      c.state_ids.push_back(id);
      if (values[i] != 1.0 || !c.state_values.empty()) {
        c.state_values.resize(c.state_ids.size() - 1, 1.0);  // the first time: the ones before it
        c.state_values.push_back(values[i]);
      }
    }
    for (const std::size_t end : token_ends) {
      c.state_offsets.push_back(base + end);
      c.edge_offsets.push_back(c.edge_ids.size());
    }
    names.clear(), hashes.clear(), values.clear(), token_ends.clear(), decoded.clear();
  }
};

/// Parses and compiles one shard of a CRFsuite file (a worker): CrfsuiteReader's checks, line by
/// line, each token's label looked up as it is read and its attributes a block of lines at a time
/// (CrfsuiteAdder's corpus, its values kept from the first that is not 1 on). An error is kept
/// for the merge, with its line.
void compile_crfsuite_shard(Shard& sh, const std::string& path) {
  Corpus& c = sh.c;
  AttributeBlock block;
  bool open = false;  // a sequence is under way
  try {
    for_each_chunk_line(sh.chunk, path, [&](std::string_view line, std::size_t number) {
      if (crfsuite_blank(line)) {
        if (open) c.sentence_offsets.push_back(c.labels.size());
        open = false;
        return true;
      }
      const std::size_t label_end = crfsuite_label_end(line, path, number);
      sh.attribute_error = true;
      for_each_attribute(line, path, number, [&](std::string_view name, double value) { block.add(line, name, value); });
      sh.attribute_error = false;
      if (label_end == 0) throw InputError(path, number, "missing label (the first field) in training data");
      if (!open) c.source_lines.push_back(number);
      open = true;
      c.labels.push_back(sh.labels.lookup(line.substr(0, label_end)));
      block.token_ends.push_back(block.names.size());
      if (block.names.size() >= AttributeBlock::kItems) block.flush(sh);
      return true;
    });
    block.flush(sh);
    if (open) c.sentence_offsets.push_back(c.labels.size());
  } catch (const InputError& e) {
    sh.error = std::current_exception();
    sh.error_line = e.line();
  } catch (...) {  // (out of memory)
    sh.error = std::current_exception();
    sh.error_line = 0;
  }
}

/// What a CRFsuite file's first lines were like (CrfsuiteReader::conll_shape's evidence), kept
/// by the thread that merges: the non-blank ones among the file's first CrfsuiteShape::kLines,
/// as the batches come. `covered` is the last line looked at.
struct ShapeEvidence {
  CrfsuiteShape shape;
  std::vector<std::pair<std::size_t, std::string>> lines;  // (number, text)
  std::size_t covered = 0;
  bool complete = false;  // the kLines lines, or the file's end, or a line that cannot be read
  bool checked = false;   // the refusal is behind (not found)

  void observe(const TextChunk& chunk, const std::string& path) {
    if (complete) return;
    try {
      for_each_chunk_line(chunk, path, [&](std::string_view line, std::size_t number) {
        covered = number;
        if (crfsuite_blank(line)) return true;
        shape.observe(line, number);
        lines.emplace_back(number, std::string(line));
        complete = shape.full();
        return !complete;
      });
    } catch (const InputError& e) {  // the shard throws it
      covered = e.line();
      complete = true;
    }
  }
  /// Throws `sh`'s error, an attribute's with the cause CrfsuiteReader gives it where the lines
  /// up to it look like CoNLL columns.
  [[noreturn]] void rethrow(const Shard& sh, const std::string& path) const {
    if (sh.attribute_error) try {
        std::rethrow_exception(sh.error);
      } catch (const InputError& e) {
        CrfsuiteShape upto;
        for (const auto& [number, text] : lines)
          if (number <= e.line()) upto.observe(text, number);
        const ConllShape why = upto.verdict(path);
        if (why.found()) throw InputError(path, e.line(), shape_problem(why, e.problem()));
      }
    std::rethrow_exception(sh.error);
  }
};

/// The order of a CRFsuite batch's errors: the first bad line's among the evidence's lines, the
/// refusal of lines that look like CoNLL columns once the evidence is complete, then the first
/// bad line's (add_crfsuite_file's contract).
void check_crfsuite_batch(const std::vector<Shard>& shards, std::size_t n, ShapeEvidence& ev, const std::string& path) {
  const Shard* bad = nullptr;
  for (std::size_t i = 0; i < n && !bad; ++i)
    if (shards[i].error) bad = &shards[i];
  if (bad && bad->error_line <= ev.covered) ev.rethrow(*bad, path);
  if (ev.complete && !ev.checked) {
    const ConllShape shape = ev.shape.verdict(path);
    if (shape.found()) features_detail::refuse_conll_shape(shape);
    ev.checked = true;
  }
  if (bad) ev.rethrow(*bad, path);
}

}  // namespace

std::uint64_t TrainingCompiler::batch_text(std::uint64_t batch_bytes, unsigned threads) {
  return std::max(batch_bytes, std::min(batch_bytes * std::max(1u, threads), kMaxBatchBytes));
}

std::uint64_t TrainingCompiler::add_crfsuite_file(const std::string& path, unsigned threads, std::uint64_t batch_bytes,
                                                  const std::function<void(std::uint64_t, std::size_t)>& after_batch) {
  if (finished_) throw Error("internal: TrainingCompiler::add_crfsuite_file after finish");
  if (fs_.format != InputFormat::crfsuite)
    throw Error("internal: TrainingCompiler::add_crfsuite_file reads CRFsuite files");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  TextChunker chunker(path);
  {
    const std::size_t target = std::size_t(std::max<std::uint64_t>(1, batch_text(batch_bytes, threads) / threads));
    std::vector<Shard> shards(threads);
    ThreadPool pool(threads);
    Ahead ahead(chunker, threads, threads > 1);  // (after the shards: its helper joined before they go)
    Place added{0, 0, 0, 0};  // by the last batch, of added_bytes of text
    std::uint64_t added_bytes = 0;
    ShapeEvidence evidence;
    for (bool more = true; more;) {
      const BatchText text = ahead.text(shards, target);
      const std::size_t n = text.n;
      more = text.more;
      ahead.start(c_, added, added_bytes, text.bytes, target);
      for (std::size_t i = 0; i < n; ++i) {
        Shard& sh = shards[i];
        evidence.observe(sh.chunk, path);
        clear(sh.c);
        sh.labels.reset(fs_.labels, false), sh.state.reset(fs_.state_attrs, counting_);
        sh.edge.reset(fs_.edge_attrs, false);
        sh.error = nullptr;
        sh.attribute_error = false;
      }
      evidence.complete = evidence.complete || !more;
      parallel(n, pool, [&](std::size_t i) { compile_crfsuite_shard(shards[i], path); });
      check_crfsuite_batch(shards, n, evidence, path);
      if (n == 0) break;
      added = add_shards(shards, n, pool, fs_, c_, state_count_, edge_count_, ahead);
      added_bytes = text.bytes;
      std::size_t line = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (!shards[i].c.source_lines.empty()) line = shards[i].c.source_lines.back();
      if (after_batch) after_batch(text.bytes_done, line);
    }
  }
#ifdef __GLIBC__
  malloc_trim(0);  // (as add_file)
#endif
  return chunker.bytes_read();
}

std::uint64_t TrainingCompiler::add_file(const std::string& path, unsigned threads, std::uint64_t batch_bytes,
                                         const std::function<void(std::uint64_t, std::size_t)>& after_batch) {
  if (finished_) throw Error("internal: TrainingCompiler::add_file after finish");
  if (fs_.format != InputFormat::conll) throw Error("internal: TrainingCompiler::add_file reads CoNLL files");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  TextChunker chunker(path);
  {
    // A batch of `threads` chunks of batch_bytes each, up to kMaxBatchBytes in all: a chunk looks
    // up again every string new to the shared caches that it meets, so the smaller the chunks,
    // the more work in all; the batch's bytes are bounded because its shards' arrays take
    // several times its text.
    const std::uint64_t batch = batch_text(batch_bytes, threads);
    const std::size_t target = std::size_t(std::max<std::uint64_t>(1, batch / threads));
    std::vector<Shard> shards(threads);
    FileContext file{&fs_, &path, 0, 0, fs_.type == ModelType::crf};
    ExpandCaches shared;  // (the slots', kept from batch to batch)
    shared.kept = true;
    ThreadPool pool(threads);
    Ahead ahead(chunker, threads, threads > 1);
    Place added{0, 0, 0, 0};  // by the last batch, of added_bytes of text
    std::uint64_t added_bytes = 0;
    for (unsigned ramp = threads > 1 ? kRamp : 0;; ramp -= ramp > 0) {
      // The first batches' slots meet most strings anew, each its own, the shared caches empty
      // or nearly: smaller batches share what they met sooner.
      auto chunk = [target](unsigned r) { return std::max<std::size_t>(1, target >> r); };
      const BatchText text = ahead.text(shards, chunk(ramp));
      const std::size_t n = text.n;
      if (n == 0) break;
      ahead.start(c_, added, added_bytes, text.bytes, chunk(ramp - (ramp > 0)));
      // The file's first token, its columns checked. Line-by-line reading (add) checks them once
      // its first batch is read: a bad line of that batch comes first.
      std::exception_ptr columns_error;
      for (std::size_t i = 0; i < n && file.columns == 0; ++i)
        if (first_conll_token(shards[i].chunk, path, file.columns, file.first_line)) try {
            check_columns(path, file.columns, file.first_line);
          } catch (const InputError&) {
            columns_error = std::current_exception();
          }
      file.expand = !columns_error;
      if (shared.bytes() > kMaxCacheBytes) shared.clear();
      shared.make_lines(fs_.templ, file.edges);
      for (std::size_t i = 0; i < n; ++i) {
        Shard& sh = shards[i];
        clear(sh.c);
        sh.caches.clear();
        sh.caches.shared = &shared;
        sh.labels.reset(fs_.labels, false), sh.state.reset(fs_.state_attrs, counting_);
        sh.edge.reset(fs_.edge_attrs, counting_);
        sh.error = nullptr;
      }
      parallel(n, pool, [&](std::size_t i) { compile_shard(shards[i], file); });
      if (columns_error) {
        std::uint64_t before = 0;  // the text before chunk i
        for (std::size_t i = 0; i < n && before < batch_bytes; before += shards[i++].chunk.text.size())
          if (shards[i].error) std::rethrow_exception(shards[i].error);
        std::rethrow_exception(columns_error);
      }
      added = add_shards(shards, n, pool, fs_, c_, state_count_, edge_count_, ahead);
      added_bytes = text.bytes;
      share_caches(shards, n, pool, shared, c_.labels.size());
      std::size_t line = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (!shards[i].tokens.sentence_lines.empty()) line = shards[i].tokens.sentence_lines.back();
      if (after_batch) after_batch(text.bytes_done, line);
    }
  }
  // The batches' memory back to the system: held in the heap (apps/main.cpp keeps freed memory
  // there) it stayed resident under what comes next, the layout's and the backend's arrays,
  // and the reading's peak grew with the threads (CoNLL-2000 ×10: 597 against 493 MB at 2).
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  return chunker.bytes_read();
}

}  // namespace crfx
